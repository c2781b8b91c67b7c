//! The service's search-profiles request answered locally, from the profile snapshots the lake
//! keeps in `token_profiles`, and its filter language as polars expressions.
//!
//! [`search`] takes the request body as it is and answers with the service's response shape
//! `{count, cursor, data}`. The work is split so that the rules live in one place:
//!
//! * **Filters** are compiled to polars expressions over the struct columns by [`filter_expr`]
//!   (usable on any `LazyFrame` of profiles). The rules are those of [`crate::search::matches`]
//!   (semantics.md section 4), restated for typed columns: in the lake a path's type is fixed by
//!   the schema, so a string operand against a numeric column matches nothing for `$eq`/`$in`
//!   and everything for `$ne`/`$nin`; null and missing behave alike (no operand may be null); a
//!   path the schema lacks, or one that runs through a non-object, is missing. A list column
//!   (`labels`) matches when one of its elements does. A timestamp column is the string the
//!   service sends (RFC 3339, `Z`, fractional seconds only when not zero). A property test checks
//!   the compiled filter against `crate::search::matches` row by row.
//! * **Text queries** run the engine's [`TextMatcher`] over the matching rows' text fields.
//! * **Order and cursors** follow [`crate::search::compare_values`] for the column types a
//!   profile has (numbers, strings, booleans; nulls first ascending and last descending; ties by
//!   `token_address` in the sort's direction) and use the engine's keyset [`Cursor`], so the
//!   simulator's cursors and these are of one format.
//! * **Projection** and `dynamic_labels`: only the page's rows become JSON documents, in the
//!   service's form, and the engine's [`project`] shapes them.
//!
//! * **From the lake's files** ([`search`]), the columns the filter, sort and text query name are
//!   read first, and only the leaves of the nested structs under those paths (the Parquet
//!   reader's leaf projection: a filter on `metrics.1h.volume` decodes that one number of every
//!   profile, not every window's metrics). A top-k of the sort value then finds the value of
//!   the row that follows the page; `token_address`, which breaks the sort's ties, is read by
//!   row selection only for the matching profiles not after that value (with a cursor, not
//!   before it), unless the request names it. The page is chosen from these, and its rows
//!   alone are read whole, by row selection, with the sections the response carries (in the
//!   same pass as the addresses when the candidates are few). A file whose manifest entry says
//!   it holds one snapshot is read without its `fetched_at`.
//! * **In memory** ([`search_lazy`]), the filter is evaluated as a column beside the sort keys,
//!   and the page's rows are read in place by number. A nested path reads its one leaf
//!   array (polars' `struct.field` would build every sibling of each struct on the way), and a
//!   `labels` condition compares each list's strings in one pass over the chunk.
//!
//! A request whose sort path is an object or an array (`market`, `labels`), or whose filter
//! reads inside `matched_labels` (a list of entries in the lake, an object in the service's
//! documents), is answered by the engine itself over the snapshot's documents: slower, never
//! different.
//!
//! A snapshot is one run of a profile sync: the rows sharing one `fetched_at`. The lake holds
//! one row per `token_address` in a snapshot, so `token_address` alone breaks ties.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use polars::prelude::*;
use serde_json::{Map, Value};

use crate::api::models::{AltTokenProfile, ChainFamily};
use crate::api::requests::{DEFAULT_LIMIT, Operation};
use crate::api::search::{Clause, Condition, Filter, Scalar, SearchRequest};
use crate::lake::read::{empty_frame, scan_files};
use crate::lake::{Dataset, Lake};
use crate::search::{Cursor, Position, SearchPage, SortKey, SortSpec, TextMatcher, project};
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

/// The chrono format of the service's timestamps (`2025-06-01T00:00:00Z`, with 3, 6 or 9
/// fractional digits only when they are not zero), as `DateTime<Utc>` serializes.
const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.fZ";

/// Up to this many candidates for a page read from the lake's files, their page columns are
/// read in one pass with their addresses.
const PREFETCH_ROWS: usize = 1_000;
const ROW: &str = "__dexlake_row";
const SORT: &str = "__dexlake_sort";
const KEEP: &str = "__dexlake_keep";

/// Which snapshot of the profiles a search runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Snapshot {
    /// The newest `fetched_at`.
    #[default]
    Latest,
    /// The snapshot fetched at exactly this time.
    At(DateTime<Utc>),
}

fn invalid(member: &str, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        operation: Operation::AltSearchProfiles.name(),
        member: member.to_owned(),
        reason: reason.into(),
    }
}

fn polars(context: &str) -> impl FnOnce(PolarsError) -> Error + '_ {
    move |source| Error::Polars {
        context: context.to_owned(),
        source,
    }
}

/// The times of the altchain profile snapshots the lake holds, oldest first.
pub fn snapshots(lake: &Lake) -> Result<Vec<DateTime<Utc>>> {
    // A file's manifest entry holds the range of its `fetched_at`: a file of one snapshot
    // (what a sync writes) names it without being read. Only files that compaction merged
    // from several snapshots are read, their `fetched_at` column alone.
    let manifest = lake.snapshot()?;
    let prefix = format!(
        "{}/chain={}/",
        Dataset::TokenProfiles.name(),
        ChainFamily::Altchain
    );
    let mut held = std::collections::BTreeSet::new();
    let mut mixed = Vec::new();
    for (path, entry) in manifest.files_of(Dataset::TokenProfiles) {
        if !path.starts_with(&prefix) {
            continue;
        }
        if entry.min_time == entry.max_time {
            held.insert(entry.min_time);
        } else {
            mixed.push(path.as_str());
        }
    }
    if !mixed.is_empty() {
        let df = scan_files(lake, Dataset::TokenProfiles, mixed)?
            .select([col("fetched_at")])
            .unique(None, UniqueKeepStrategy::Any)
            .collect()
            .map_err(polars("listing profile snapshots"))?;
        let times = df
            .column("fetched_at")
            .map_err(polars("listing profile snapshots"))?;
        for i in 0..times.len() {
            match times.get(i).map_err(polars("listing profile snapshots"))? {
                AnyValue::Datetime(v, unit, _) | AnyValue::DatetimeOwned(v, unit, _) => {
                    held.insert(datetime_of(v, unit));
                }
                _ => {
                    return Err(Error::Lake {
                        path: lake.root().to_owned(),
                        message: "a token_profiles fetched_at is null".into(),
                    });
                }
            }
        }
    }
    Ok(held.into_iter().collect())
}

fn altchain_profiles(lake: &Lake) -> Result<LazyFrame> {
    let chain = ChainFamily::Altchain.to_string();
    Ok(lake
        .scan(Dataset::TokenProfiles)?
        .filter(col("chain").eq(lit(chain))))
}

/// The `fetched_at` of the snapshot a caller names, checked against those the lake holds.
pub fn snapshot_time(lake: &Lake, snapshot: Snapshot) -> Result<DateTime<Utc>> {
    let held = snapshots(lake)?;
    let list = || {
        held.iter()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(match snapshot {
        Snapshot::Latest => *held.last().ok_or_else(|| Error::Lake {
            path: lake.root().to_owned(),
            message: "holds no altchain token_profiles snapshot; sync the profiles first".into(),
        })?,
        Snapshot::At(t) if held.contains(&t) => t,
        Snapshot::At(t) => {
            return Err(Error::Lake {
                path: lake.root().to_owned(),
                message: format!(
                    "holds no token_profiles snapshot fetched at {}; it holds: {}",
                    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                    if held.is_empty() {
                        "none".to_owned()
                    } else {
                        list()
                    }
                ),
            });
        }
    })
}

/// The profile documents of one snapshot as a lazy frame of [`DOCUMENT_COLUMNS`]. Errors when
/// the lake holds no snapshot, or not the one named (the error lists those it holds).
pub fn snapshot_frame(lake: &Lake, snapshot: Snapshot) -> Result<LazyFrame> {
    document_frame(lake, snapshot_time(lake, snapshot)?)
}

fn document_frame(lake: &Lake, at: DateTime<Utc>) -> Result<LazyFrame> {
    // The row index stops later filters from being pushed into the Parquet reader: polars 0.55
    // panics there on a predicate over a field of a struct that holds a timestamp
    // (`metadata.symbol`). The snapshot's own filter is still pushed down and prunes files.
    Ok(snapshot_scan(lake, at)?
        .with_row_index(ROW, None)
        .select(DOCUMENT_COLUMNS.map(col)))
}

/// The rows of the snapshot fetched at `at`, every column, filters pushed into the scan.
fn snapshot_scan(lake: &Lake, at: DateTime<Utc>) -> Result<LazyFrame> {
    let fetched = col("fetched_at")
        .cast(DataType::Int64)
        .eq(lit(at.timestamp_micros()));
    Ok(altchain_profiles(lake)?.filter(col("date").eq(lit(at.date_naive())).and(fetched)))
}

/// Answers a search-profiles request from a profile snapshot of the lake, with the service's
/// response shape. See the [module docs](self) for how, and [`crate::search::search`] for the
/// rules of every member.
pub fn search(lake: &Lake, request: &SearchRequest, snapshot: Snapshot) -> Result<SearchPage> {
    request.validate()?;
    let at = snapshot_time(lake, snapshot)?;
    let mut frame = document_frame(lake, at)?;
    // Otherwise the page's rows are read by address, a top-level column whose filter the
    // Parquet reader takes.
    let by_address = snapshot_scan(lake, at)?.select(DOCUMENT_COLUMNS.map(col));
    let schema = frame
        .collect_schema()
        .map_err(polars("reading the profiles' schema"))?;
    if columnar_covers(request, &schema)? {
        // The filter, sort and text query read a few leaves of the nested columns: only those
        // are decoded, for every profile of the snapshot, and then the page's whole rows only.
        if let Some(keys) = narrow::read(lake, at, &read_paths(request), &schema)? {
            let frame = keys.frame.clone().lazy();
            return search_with(
                frame,
                request,
                Page::Located {
                    lake,
                    keys: &keys,
                    schema: &schema,
                    by_address,
                },
            );
        }
    }
    search_with(frame, request, Page::ByAddress(by_address))
}

/// The dotted paths a page's documents need: the members always returned, the sections the
/// options ask for, and the dynamic labels' filters.
fn page_paths(request: &SearchRequest) -> Vec<String> {
    let mut out: Vec<String> = ["updated_at", "synced_at", "token_address"]
        .map(str::to_owned)
        .to_vec();
    if let Some(options) = &request.options {
        if options.include_labels == Some(true) {
            out.extend(["labels".to_owned(), "matched_labels".to_owned()]);
        }
        if options.include_metadata == Some(true) {
            out.push("metadata".to_owned());
        }
        if options.include_market == Some(true) {
            out.push("market".to_owned());
        }
        for window in options.include_metrics.iter().flatten() {
            out.push(format!("metrics.{}", window.as_str()));
        }
    }
    for filter in request.dynamic_labels.iter().flat_map(|d| d.values()) {
        filter_paths(filter, &mut out);
    }
    out
}

/// Every field path a filter names, in `$and` and `$or` too.
fn filter_paths(filter: &Filter, out: &mut Vec<String>) {
    for clause in &filter.clauses {
        match clause {
            Clause::And(filters) | Clause::Or(filters) => {
                filters.iter().for_each(|f| filter_paths(f, out));
            }
            Clause::Field { path, .. } => out.push(path.clone()),
        }
    }
}

/// Where the columnar path reads the page's whole rows from.
enum Page<'a> {
    /// The searched frame itself, by row number.
    ByRow,
    /// This frame of the snapshot, by `token_address` (a top-level column whose filter the
    /// Parquet reader takes).
    ByAddress(LazyFrame),
    /// The lake's files, at the rows the key columns were read from; by address when a column
    /// has a type the file reader does not convert.
    Located {
        lake: &'a Lake,
        keys: &'a narrow::Keys,
        schema: &'a Schema,
        by_address: LazyFrame,
    },
}

/// Whether the columnar path answers the request over profiles of `schema` (else the engine
/// does, over whole documents).
fn columnar_covers(request: &SearchRequest, schema: &Schema) -> Result<bool> {
    if let Some(filter) = &request.filter
        && compile(filter, schema)?.is_none()
    {
        return Ok(false);
    }
    Ok(match resolve(&SortSpec::of(request).field, schema) {
        Resolved::Value { kind, .. } => kind.sort_rank().is_some(),
        Resolved::Missing => true,
        Resolved::Unsupported => false,
    })
}

/// The dotted paths the columnar path reads before the page is chosen: the filter's, the
/// sort's and the text query's. `token_address` (which breaks the sort's ties) is read after
/// the filter, only for the profiles that can reach the page, unless one of these paths names
/// it.
fn read_paths(request: &SearchRequest) -> Vec<String> {
    let mut out = vec![SortSpec::of(request).field];
    if let Some(filter) = &request.filter {
        filter_paths(filter, &mut out);
    }
    if let Some(query) = &request.query {
        out.extend(
            TextMatcher::new(query)
                .fields()
                .iter()
                .map(|f| (*f).to_owned()),
        );
    }
    out
}

/// Answers a search-profiles request over any frame of profiles with the lake's columns
/// ([`DOCUMENT_COLUMNS`] at least), one row per `token_address`.
pub fn search_lazy(profiles: LazyFrame, request: &SearchRequest) -> Result<SearchPage> {
    search_with(profiles, request, Page::ByRow)
}

/// The search; `page` says where the page's whole rows are read from.
fn search_with(profiles: LazyFrame, request: &SearchRequest, page: Page<'_>) -> Result<SearchPage> {
    request.validate()?;
    let mut profiles = profiles;
    let schema = profiles
        .collect_schema()
        .map_err(polars("reading the profiles' schema"))?;
    let keep: Vec<Expr> = DOCUMENT_COLUMNS
        .iter()
        .filter(|c| schema.contains(c))
        .map(|c| col(*c))
        .collect();
    let profiles = profiles.select(keep);
    let schema: Schema = schema
        .iter()
        .filter(|(name, _)| DOCUMENT_COLUMNS.contains(&name.as_str()))
        .map(|(name, dtype)| Field::new(name.clone(), dtype.clone()))
        .collect();

    let predicate = match &request.filter {
        None => Some(lit(true)),
        Some(filter) => compile(filter, &schema)?,
    };
    let sort = SortSpec::of(request);
    let sort_column = match resolve(&sort.field, &schema) {
        Resolved::Value { expr, kind, .. } => kind.sort_rank().map(|rank| (expr, rank, kind)),
        Resolved::Missing => Some((lit(NULL), 0, Kind::Number)),
        Resolved::Unsupported => None,
    };
    match (predicate, sort_column) {
        (Some(predicate), Some((sort_expr, rank, kind))) => columnar(
            profiles, page, request, &schema, predicate, &sort, sort_expr, rank, kind,
        ),
        _ => by_engine(profiles, request),
    }
}

/// The engine over every document of the frame: for requests the columnar path does not cover.
fn by_engine(profiles: LazyFrame, request: &SearchRequest) -> Result<SearchPage> {
    let df = profiles.collect().map_err(polars("reading the profiles"))?;
    let docs = documents(&df)?;
    crate::search::search(request, &docs)
}

#[expect(
    clippy::too_many_arguments,
    reason = "one private step of search_lazy, its inputs named"
)]
fn columnar(
    profiles: LazyFrame,
    source: Page<'_>,
    request: &SearchRequest,
    schema: &Schema,
    predicate: Expr,
    sort: &SortSpec,
    sort_expr: Expr,
    rank: u8,
    kind: Kind,
) -> Result<SearchPage> {
    let limit = usize::try_from(request.limit.unwrap_or(DEFAULT_LIMIT))
        .expect("a validated limit of at most 100 fits in usize");
    let text = request.query.as_ref().map(TextMatcher::new);
    let text_columns: Vec<String> = text
        .as_ref()
        .map(|t| {
            t.fields()
                .iter()
                .map(|f| format!("__dexlake_text_{f}"))
                .collect()
        })
        .unwrap_or_default();
    // The key columns of a lake's files may leave `token_address` for later (see `read_paths`).
    let late_address = !schema.contains("token_address");
    let mut key_columns = vec![col(ROW), sort_value(sort_expr, kind).alias(SORT)];
    if !late_address {
        key_columns.push(col("token_address"));
    }
    if let Some(t) = &text {
        for (path, name) in t.fields().iter().zip(&text_columns) {
            let value = match resolve(path, schema) {
                Resolved::Value {
                    expr,
                    kind: Kind::String,
                } => expr,
                Resolved::Value {
                    expr,
                    kind: Kind::Timestamp,
                } => expr.dt().to_string(TIMESTAMP_FORMAT),
                _ => lit(NULL).cast(DataType::String),
            };
            key_columns.push(value.alias(name.as_str()));
        }
    }
    let with_row = profiles.clone().with_row_index(ROW, None);
    // The predicate is evaluated as a column beside the keys and the rows filtered afterwards,
    // so the struct columns it reads are only read: filtering the frame itself would copy every
    // nested field of every matching row.
    key_columns.push(predicate.fill_null(lit(false)).alias(KEEP));
    let evaluated = with_row
        .clone()
        .select(key_columns)
        .collect()
        .map_err(polars("filtering profiles"))?;
    let keep = evaluated
        .column(KEEP)
        .and_then(|c| c.bool())
        .map_err(polars("filtering profiles"))?
        .clone();
    let mut keys = evaluated
        .filter(&keep)
        .and_then(|df| df.drop(KEEP))
        .map_err(polars("filtering profiles"))?;
    if let Some(t) = &text {
        let mut columns = Vec::with_capacity(text_columns.len());
        for name in &text_columns {
            let column = keys.column(name).map_err(polars("text query"))?;
            columns.push(column.str().map_err(polars("text query"))?.clone());
        }
        let mask: BooleanChunked = (0..keys.height())
            .map(|i| {
                columns
                    .iter()
                    .any(|c| c.get(i).is_some_and(|v| t.matches_field(v)))
            })
            .collect();
        keys = keys.filter(&mask).map_err(polars("text query"))?;
    }
    let count = u64::try_from(keys.height()).expect("a frame height fits in u64");

    let descending = sort.descending;
    let order = || {
        SortMultipleOptions::default()
            .with_order_descending_multi([descending, descending])
            .with_nulls_last_multi([descending, descending])
    };
    let last = match &request.cursor {
        Some(cursor) => Some(Cursor::decode(cursor, sort)?),
        None => None,
    };
    // The candidates' rows (ascending) and their page columns, when read with their addresses.
    let mut prefetched: Option<(Vec<IdxSize>, DataFrame)> = None;
    // Without a cursor, only rows not after the sort value of the row that follows the page
    // can reach it: a top-k of the value alone finds that value, and only those rows are then
    // ordered by (value, address), the address breaking ties.
    if last.is_none() {
        let top = keys
            .clone()
            .lazy()
            .select([col(SORT)])
            .sort_by_exprs(
                [col(SORT)],
                SortMultipleOptions::default()
                    .with_order_descending(descending)
                    .with_nulls_last(descending),
            )
            .limit(IdxSize::try_from(limit + 1).expect("a page limit fits in IdxSize"))
            .collect()
            .map_err(polars("sorting profiles"))?;
        if top.height() > limit {
            let sorted = top.column(SORT).map_err(polars("sorting profiles"))?;
            let (beyond, _) = beyond_and_tie(&sort_key(sorted, limit), rank, descending);
            keys = keys
                .lazy()
                .filter(beyond.not())
                .collect()
                .map_err(polars("sorting profiles"))?;
        }
    }
    if late_address {
        // Only those rows need their address; with a cursor, the rows not before it by value.
        if let Some(last) = &last {
            let (beyond, tie) = beyond_and_tie(&last.value, rank, descending);
            keys = keys
                .lazy()
                .filter(beyond.or(tie))
                .collect()
                .map_err(polars("applying the cursor"))?;
        }
        let Page::Located {
            lake,
            keys: located,
            schema: whole,
            ..
        } = &source
        else {
            return Err(Error::InvalidArgument {
                argument: "profiles".into(),
                reason: "the frame has no token_address column".into(),
            });
        };
        let rows = keys
            .column(ROW)
            .and_then(|c| c.idx())
            .map_err(polars("reading the matches' addresses"))?;
        let rows: Vec<IdxSize> = rows.into_no_null_iter().collect();
        // Few candidates (no long run of ties at the page's end): their page columns are read
        // in the same pass as their addresses, and the page is taken from them.
        if !rows.is_empty() && rows.len() <= PREFETCH_ROWS {
            prefetched = located
                .rows(lake, &rows, &page_paths(request), whole)?
                .map(|frame| (rows.clone(), frame));
        }
        let addresses = match &prefetched {
            Some((_, frame)) => frame
                .column("token_address")
                .map_err(polars("reading the matches' addresses"))?
                .clone(),
            None if rows.is_empty() => Column::new_empty("token_address".into(), &DataType::String),
            None => located
                .rows(lake, &rows, &["token_address".to_owned()], whole)?
                .ok_or_else(|| Error::Lake {
                    path: lake.root().to_owned(),
                    message: "the profiles' token_address column has an unexpected type".into(),
                })?
                .column("token_address")
                .map_err(polars("reading the matches' addresses"))?
                .clone(),
        };
        keys.with_column(addresses)
            .map_err(polars("reading the matches' addresses"))?;
    }
    let mut page = keys.lazy();
    if let Some(last) = &last {
        page = page.filter(after(last, rank, descending)?);
    }
    let page = page
        .sort_by_exprs([col(SORT), col("token_address")], order())
        .limit(IdxSize::try_from(limit + 1).expect("a page limit fits in IdxSize"))
        .collect()
        .map_err(polars("sorting profiles"))?;

    let rows = page
        .column(ROW)
        .map_err(polars("sorting profiles"))?
        .idx()
        .map_err(polars("sorting profiles"))?
        .clone();
    let shown = page.height().min(limit);
    let next = if page.height() > limit {
        let i = shown - 1;
        let addresses = page.column("token_address").map_err(polars("cursor"))?;
        let address = match addresses.get(i).map_err(polars("cursor"))? {
            AnyValue::String(s) => s.to_owned(),
            AnyValue::StringOwned(s) => s.to_string(),
            _ => String::new(),
        };
        let position = Position {
            value: sort_key(page.column(SORT).map_err(polars("cursor"))?, i),
            token_address: SortKey::Str(address.into()),
            ordinal: u64::from(rows.get(i).unwrap_or_default()),
        };
        Some(Cursor::encode(sort, &position))
    } else {
        None
    };

    let wanted: Vec<IdxSize> = (0..shown).filter_map(|i| rows.get(i)).collect();
    if let Some((candidates, frame)) = &prefetched {
        let positions = wanted.iter().map(|row| {
            candidates
                .binary_search(row)
                .expect("the page's rows are among the candidates")
        });
        let docs = documents_at(frame, positions)?;
        return Ok(answer(count, next, &docs, request));
    }
    let mut source = source;
    if let Page::Located {
        lake,
        keys,
        schema,
        by_address,
    } = source
    {
        source = match keys.rows(lake, &wanted, &page_paths(request), schema)? {
            Some(rows) => return Ok(answer(count, next, &documents(&rows)?, request)),
            None => Page::ByAddress(by_address),
        };
    }
    let docs = if wanted.is_empty() {
        Vec::new()
    } else if let Page::ByAddress(frame) = source {
        let page_addresses = page
            .column("token_address")
            .map_err(polars("reading the page's profiles"))?
            .str()
            .map_err(polars("reading the page's profiles"))?
            .slice(0, shown);
        let picked = frame
            .filter(col("token_address").is_in(
                lit(page_addresses.clone().into_series()).implode(false),
                false,
            ))
            .collect()
            .map_err(polars("reading the page's profiles"))?;
        let docs = documents(&picked)?;
        let by_address: HashMap<&str, &Value> = docs
            .iter()
            .filter_map(|d| Some((d.get("token_address")?.as_str()?, d)))
            .collect();
        (0..shown)
            .filter_map(|i| by_address.get(page_addresses.get(i)?).copied().cloned())
            .collect()
    } else {
        // Each row read in place by number: filtering the frame by a mask, or gathering from
        // it, would visit (or first rechunk) every nested leaf array for the page's few.
        let all = profiles
            .collect()
            .map_err(polars("reading the page's profiles"))?;
        documents_at(&all, wanted.iter().map(|&row| row as usize))?
    };
    Ok(answer(count, next, &docs, request))
}

/// The response: the page's documents (in page order) shaped by the request's options.
fn answer(
    count: u64,
    cursor: Option<String>,
    docs: &[Value],
    request: &SearchRequest,
) -> SearchPage {
    let options = request.options.clone().unwrap_or_default();
    SearchPage {
        count,
        cursor,
        data: docs
            .iter()
            .map(|doc| project(doc, &options, request))
            .collect(),
    }
}

/// The sort expression of a column: numbers as `f64` with `-0` made `0` (as the engine
/// compares them), timestamps as the service's strings.
fn sort_value(expr: Expr, kind: Kind) -> Expr {
    match kind {
        Kind::Number => expr.cast(DataType::Float64) + lit(0.0),
        Kind::Timestamp => expr.dt().to_string(TIMESTAMP_FORMAT),
        _ => expr,
    }
}

/// The sort value of row `i` of the sort column, as the engine's cursors hold it.
fn sort_key(column: &Column, i: usize) -> SortKey<'static> {
    match column.get(i) {
        Ok(AnyValue::Float64(x)) => SortKey::number(x),
        Ok(AnyValue::Boolean(b)) => SortKey::Bool(b),
        Ok(AnyValue::String(s)) => SortKey::Str(s.to_owned().into()),
        Ok(AnyValue::StringOwned(s)) => SortKey::Str(s.to_string().into()),
        _ => SortKey::Null,
    }
}

/// Rows strictly after the cursor's position in the request's order (keyset paging), for a
/// sort column whose non-null values have type rank `rank` (0 when the column is missing).
fn after(last: &Position<'_>, rank: u8, descending: bool) -> Result<Expr> {
    let SortKey::Str(last_address) = &last.token_address else {
        return Err(invalid(
            "cursor",
            "does not hold a token_address; pass the cursor of a previous page",
        ));
    };
    let address = col("token_address");
    let address_after = if descending {
        address.lt(lit(last_address.to_string()))
    } else {
        address.gt(lit(last_address.to_string()))
    };
    let (beyond, tie) = beyond_and_tie(&last.value, rank, descending);
    Ok(beyond.or(tie.and(address_after)))
}

/// Rows whose sort value lies strictly after `value` in the request's order, and rows whose
/// sort value equals it (null equal to null), for a sort column whose non-null values have
/// type rank `rank` (0 when the column is missing). Nulls come first ascending, last
/// descending; values of another type rank order by rank.
fn beyond_and_tie(value: &SortKey<'_>, rank: u8, descending: bool) -> (Expr, Expr) {
    let column = col(SORT);
    let value_rank = value.rank();
    let (null_beyond, null_tie) = if value_rank == 0 {
        (lit(false), lit(true))
    } else {
        (lit(descending), lit(false))
    };
    let (beyond, tie) = if rank == 0 {
        (lit(false), lit(false))
    } else if value_rank < rank {
        (lit(!descending), lit(false))
    } else if value_rank > rank {
        (lit(descending), lit(false))
    } else {
        let v = match value {
            SortKey::Num(x) => lit(*x),
            SortKey::Str(s) => lit(s.to_string()),
            SortKey::Bool(b) => lit(*b),
            _ => unreachable!("a rank of a scalar column is that of a number, string or bool"),
        };
        let beyond = if descending {
            column.clone().lt(v.clone())
        } else {
            column.clone().gt(v.clone())
        };
        (beyond, column.clone().eq(v))
    };
    (
        when(column.clone().is_null())
            .then(null_beyond)
            .otherwise(beyond),
        when(column.is_null()).then(null_tie).otherwise(tie),
    )
}

mod narrow;

// ----- Filters as polars expressions -----

/// What a path's value is, as the service's documents would hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    String,
    Bool,
    /// A timestamp column: the service's RFC 3339 string.
    Timestamp,
    /// A list of strings (`labels`).
    StringList,
    /// An object: a struct column, or `matched_labels` (entries in the lake, an object in the
    /// documents).
    Object,
}

impl Kind {
    fn of(dtype: &DataType) -> Option<Kind> {
        Some(match dtype {
            DataType::Boolean => Kind::Bool,
            DataType::String => Kind::String,
            DataType::Datetime(_, _) => Kind::Timestamp,
            DataType::List(inner) if **inner == DataType::String => Kind::StringList,
            DataType::Struct(_) => Kind::Object,
            d if d.is_primitive_numeric() => Kind::Number,
            _ => return None,
        })
    }

    /// The rank of [`SortKey::rank`] of the column's values, when the columnar sort covers it.
    fn sort_rank(self) -> Option<u8> {
        match self {
            Kind::Number => Some(1),
            Kind::String | Kind::Timestamp => Some(2),
            Kind::Bool => Some(5),
            Kind::StringList | Kind::Object => None,
        }
    }
}

enum Resolved {
    /// The path names a column value (null where the value or one of its parents is null).
    Value { expr: Expr, kind: Kind },
    /// The path is missing in every profile.
    Missing,
    /// The columnar evaluation does not cover this path.
    Unsupported,
}

fn resolve(path: &str, schema: &Schema) -> Resolved {
    let mut segments = path.split('.');
    let first = segments.next().unwrap_or_default();
    let Some(mut dtype) = schema.get(first).cloned() else {
        return Resolved::Missing;
    };
    let mut inner: Vec<PlSmallStr> = Vec::new();
    for segment in segments {
        if first == "matched_labels" {
            return Resolved::Unsupported;
        }
        let DataType::Struct(fields) = &dtype else {
            return Resolved::Missing;
        };
        let Some(field) = fields.iter().find(|f| f.name().as_str() == segment) else {
            return Resolved::Missing;
        };
        inner.push(field.name().clone());
        dtype = field.dtype().clone();
    }
    let kind = if path == "matched_labels" {
        Some(Kind::Object)
    } else {
        Kind::of(&dtype)
    };
    let Some(kind) = kind else {
        return Resolved::Unsupported;
    };
    let expr = if inner.is_empty() {
        col(first)
    } else {
        nested_value(first, inner, dtype)
    };
    Resolved::Value { expr, kind }
}

/// The value at `column.inner[0].inner[1]...` of a struct column, null where it or one of its
/// parents is null.
///
/// polars' `struct.field` builds every sibling field of the struct and pushes the struct's
/// nulls into each of them (a profile's `metrics` holds 7 windows of about 50 numbers); this
/// reads the one leaf array of each chunk and combines the parents' validity into it.
fn nested_value(column: &str, inner: Vec<PlSmallStr>, dtype: DataType) -> Expr {
    let name = inner.last().cloned().unwrap_or_default();
    let out = Field::new(name.clone(), dtype.clone());
    col(column).map(
        move |c: Column| nested_leaf(&c, &inner, &dtype, &name),
        move |_, _| Ok(out.clone()),
    )
}

fn nested_leaf(
    column: &Column,
    inner: &[PlSmallStr],
    dtype: &DataType,
    name: &PlSmallStr,
) -> PolarsResult<Column> {
    use polars_arrow::array::{Array, StructArray};
    use polars_arrow::compute::utils::combine_validities_and;

    let series = column.as_materialized_series();
    let outer = series.struct_()?;
    let mut chunks = Vec::with_capacity(outer.chunks().len());
    // The leaf's type in this frame, which may differ from the schema the filter was compiled
    // for (`filter_expr` runs on any frame of profiles).
    let mut found = dtype;
    for chunk in outer.chunks() {
        let mut array: &dyn Array = chunk.as_ref();
        let mut level = outer.dtype();
        let mut validity = None;
        for segment in inner {
            let DataType::Struct(fields) = level else {
                polars_bail!(SchemaMismatch: "{segment} is not inside a struct");
            };
            let Some(i) = fields.iter().position(|f| f.name() == segment) else {
                polars_bail!(StructFieldNotFound: "{segment}");
            };
            let Some(parent) = array.as_any().downcast_ref::<StructArray>() else {
                polars_bail!(SchemaMismatch: "{segment}: the parent array is not a struct");
            };
            validity = combine_validities_and(validity.as_ref(), parent.validity());
            array = parent.values()[i].as_ref();
            level = fields[i].dtype();
        }
        let validity = combine_validities_and(validity.as_ref(), array.validity());
        chunks.push(array.with_validity(validity));
        found = level;
    }
    // SAFETY: the chunks are the arrays of the struct field whose dtype is `found`.
    let leaf = unsafe { Series::from_chunks_and_dtype_unchecked(name.clone(), chunks, found) };
    let leaf = if found == dtype {
        leaf
    } else {
        leaf.cast(dtype)?
    };
    Ok(leaf.into_column())
}

/// The filter as a boolean polars expression over a frame of profiles with the lake's
/// `token_profiles` columns (struct columns `metadata`, `market`, `metrics`, list column
/// `labels`), with the service's rules (see the [module docs](self)). An empty filter is `true`.
///
/// Errors when the filter reads inside `matched_labels`, which [`search`] answers through the
/// engine instead.
pub fn filter_expr(filter: &Filter) -> Result<Expr> {
    let schema = profile_schema()?;
    filter_expr_for(filter, &schema)
}

/// [`filter_expr`] for a frame of the given schema.
pub fn filter_expr_for(filter: &Filter, schema: &Schema) -> Result<Expr> {
    compile(filter, schema)?.ok_or_else(|| {
        invalid(
            "filter",
            "reads inside matched_labels, which has no column expression; use analytics::search::search",
        )
    })
}

/// The polars schema of the lake's `token_profiles` files.
pub fn profile_schema() -> Result<Schema> {
    let schema = empty_frame(Dataset::TokenProfiles)?
        .collect_schema()
        .map_err(polars("the token_profiles schema"))?;
    Ok(schema.as_ref().clone())
}

/// `None` when some path is not covered by the columnar evaluation.
fn compile(filter: &Filter, schema: &Schema) -> Result<Option<Expr>> {
    let mut out = lit(true);
    for clause in &filter.clauses {
        let expr = match clause {
            Clause::And(filters) | Clause::Or(filters) => {
                let is_and = matches!(clause, Clause::And(_));
                let mut acc = lit(is_and);
                for f in filters {
                    let Some(e) = compile(f, schema)? else {
                        return Ok(None);
                    };
                    acc = if is_and { acc.and(e) } else { acc.or(e) };
                }
                acc
            }
            Clause::Field { path, conditions } => {
                if path.is_empty() || path.split('.').any(str::is_empty) {
                    return Err(invalid(path, "expected a dotted field path"));
                }
                let resolved = resolve(path, schema);
                if matches!(resolved, Resolved::Unsupported) {
                    return Ok(None);
                }
                let mut acc = lit(true);
                for c in conditions {
                    acc = acc.and(condition(c, &resolved));
                }
                acc
            }
        };
        out = out.and(expr);
    }
    Ok(Some(out))
}

fn condition(condition: &Condition, resolved: &Resolved) -> Expr {
    match condition {
        Condition::Eq(s) => any_equal(resolved, std::slice::from_ref(s)),
        Condition::In(list) => any_equal(resolved, list),
        Condition::Ne(s) => any_equal(resolved, std::slice::from_ref(s)).not(),
        Condition::Nin(list) => any_equal(resolved, list).not(),
        Condition::Gt(n) => range(resolved, |v| v.gt(lit(*n))),
        Condition::Gte(n) => range(resolved, |v| v.gt_eq(lit(*n))),
        Condition::Lt(n) => range(resolved, |v| v.lt(lit(*n))),
        Condition::Lte(n) => range(resolved, |v| v.lt_eq(lit(*n))),
    }
}

/// Whether the value (or one element of a list) `$eq`s one of the scalars; never null.
fn any_equal(resolved: &Resolved, scalars: &[Scalar]) -> Expr {
    let Resolved::Value { expr, kind } = resolved else {
        return lit(false);
    };
    let mut out = lit(false);
    for s in scalars {
        let hit = match (kind, s) {
            (Kind::Number, Scalar::Num(n)) => {
                Some(expr.clone().cast(DataType::Float64).eq(lit(*n)))
            }
            (Kind::String, Scalar::Str(t)) => Some(expr.clone().eq(lit(t.clone()))),
            (Kind::Timestamp, Scalar::Str(t)) => Some(
                expr.clone()
                    .dt()
                    .to_string(TIMESTAMP_FORMAT)
                    .eq(lit(t.clone())),
            ),
            (Kind::Bool, Scalar::Bool(b)) => Some(expr.clone().eq(lit(*b))),
            (Kind::StringList, Scalar::Str(t)) => Some(list_contains(expr.clone(), t.clone())),
            _ => None,
        };
        if let Some(hit) = hit {
            out = out.or(hit.fill_null(lit(false)));
        }
    }
    out
}

/// Whether a list of strings holds `needle`: null where the list is null, as polars'
/// `list.contains` (which goes through `is_in` row by row, with a lookup per row; this compares
/// the elements of each chunk in one pass).
fn list_contains(list: Expr, needle: String) -> Expr {
    list.map(
        move |c: Column| list_contains_column(&c, &needle),
        |_, field| Ok(Field::new(field.name().clone(), DataType::Boolean)),
    )
}

fn list_contains_column(column: &Column, needle: &str) -> PolarsResult<Column> {
    use polars_arrow::array::{Array, BooleanArray, ListArray, Utf8ViewArray};
    use polars_arrow::bitmap::MutableBitmap;
    use rayon::prelude::*;

    let Ok(needle_length) = u32::try_from(needle.len()) else {
        polars_bail!(ComputeError: "a string of over 4 GiB");
    };
    // A frame's lists of another element type (categories, say) are compared as strings.
    let strings = DataType::List(Box::new(DataType::String));
    let series = column.as_materialized_series();
    let series = if series.dtype() == &strings {
        series.clone()
    } else {
        series.cast(&strings)?
    };
    let lists = series.list()?;
    let arrays: Vec<&ListArray<i64>> = lists.downcast_iter().collect();
    // One task per chunk (a file or a row group of the lake).
    let chunks = arrays
        .par_iter()
        .map(|list| -> PolarsResult<ArrayRef> {
            let Some(values) = list.values().as_any().downcast_ref::<Utf8ViewArray>() else {
                polars_bail!(SchemaMismatch: "expected a list of strings");
            };
            let offsets = list.offsets().buffer();
            let views = values.views();
            let mut hits = MutableBitmap::with_capacity(list.len());
            for bounds in offsets.windows(2) {
                let (start, end) = (bounds[0] as usize, bounds[1] as usize);
                let hit = (start..end).any(|j| {
                    // A string of another length is rejected from its view alone.
                    views[j].length == needle_length
                        && values.is_valid(j)
                        // SAFETY: `j` is within the list's offsets, so within `values`.
                        && unsafe { values.value_unchecked(j) } == needle
                });
                hits.push(hit);
            }
            Ok(Box::new(BooleanArray::new(
                polars_arrow::datatypes::ArrowDataType::Boolean,
                hits.into(),
                list.validity().cloned(),
            )))
        })
        .collect::<PolarsResult<Vec<ArrayRef>>>()?;
    // SAFETY: boolean arrays for a Boolean series.
    let out = unsafe {
        Series::from_chunks_and_dtype_unchecked(series.name().clone(), chunks, &DataType::Boolean)
    };
    Ok(out.into_column())
}

/// A range operator: numbers only; never null.
fn range(resolved: &Resolved, cmp: impl Fn(Expr) -> Expr) -> Expr {
    match resolved {
        Resolved::Value {
            expr,
            kind: Kind::Number,
        } => cmp(expr.clone().cast(DataType::Float64)).fill_null(lit(false)),
        _ => lit(false),
    }
}

// ----- Rows as the service's documents -----

fn datetime_of(value: i64, unit: TimeUnit) -> DateTime<Utc> {
    let nanos = match unit {
        TimeUnit::Nanoseconds => value,
        TimeUnit::Microseconds => value.saturating_mul(1_000),
        TimeUnit::Milliseconds => value.saturating_mul(1_000_000),
    };
    DateTime::from_timestamp_nanos(nanos)
}

/// Every row of `df` as a profile document of the service: null members left out, timestamps as
/// RFC 3339 strings, `matched_labels` as an object, and member order that of the service's
/// model.
pub fn documents(df: &DataFrame) -> Result<Vec<Value>> {
    documents_at(df, 0..df.height())
}

/// The documents of the given rows of `df`, in that order. Each value is read in place: slicing
/// the frame to a row would copy the array handles of every nested field.
fn documents_at(df: &DataFrame, rows: impl Iterator<Item = usize>) -> Result<Vec<Value>> {
    let columns: Vec<&Column> = DOCUMENT_COLUMNS
        .iter()
        .filter_map(|name| df.column(name).ok())
        .collect();
    rows.map(|i| {
        let mut map = Map::new();
        for column in &columns {
            let value = column
                .get(i)
                .map_err(polars("turning profiles into documents"))?;
            let labels = column.name().as_str() == "matched_labels";
            if let Some(v) = json_of(value, labels) {
                map.insert(column.name().to_string(), v);
            }
        }
        let doc = Value::Object(map);
        let profile: AltTokenProfile =
            serde_json::from_value(doc.clone()).map_err(|source| Error::Decode {
                operation: Operation::AltSearchProfiles.name(),
                excerpt: doc.to_string().chars().take(300).collect(),
                source,
            })?;
        Ok(serde_json::to_value(profile)
            .expect("a profile of finite numbers and strings converts to JSON"))
    })
    .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two frames stacked (two chunks) and sliced, so the kernels see chunk offsets.
    fn chunked_and_sliced(make: impl Fn(u64) -> DataFrame) -> DataFrame {
        let mut df = make(0);
        df.vstack_mut(&make(1)).expect("vstack");
        assert_eq!(df.first_col_n_chunks(), 2);
        let height = df.height();
        df.slice(1, height - 2)
    }

    fn collect_one(df: &DataFrame, expr: Expr) -> Series {
        df.clone()
            .lazy()
            .select([expr.alias("out")])
            .collect()
            .expect("collect")
            .column("out")
            .expect("out")
            .as_materialized_series()
            .clone()
    }

    /// polars pushes a struct's nulls into its fields when it builds the struct, so the parents'
    /// validity that `nested_leaf` combines in is a guard for arrays built otherwise.
    #[test]
    fn nested_leaf_equals_struct_field_with_parent_nulls() {
        let df = chunked_and_sliced(|seed| {
            let n = 40;
            let values: Vec<Option<f64>> = (0..n)
                .map(|i| (i % 3 != 0).then_some((i + seed) as f64))
                .collect();
            let outer: Vec<bool> = (0..n).map(|i| (i + seed) % 4 != 1).collect();
            let inner: Vec<bool> = (0..n).map(|i| (i + seed) % 5 != 2).collect();
            let base = df![
                "v" => values,
                "w" => (0..n).map(|i| i as f64).collect::<Vec<_>>(),
                "outer" => outer,
                "inner" => inner,
            ]
            .expect("frame");
            base.lazy()
                .select([when(col("outer"))
                    .then(as_struct(vec![
                        col("w"),
                        when(col("inner"))
                            .then(as_struct(vec![col("v"), col("w")]))
                            .otherwise(lit(NULL))
                            .alias("a"),
                    ]))
                    .otherwise(lit(NULL))
                    .alias("s")])
                .collect()
                .expect("struct frame")
        });
        let schema = df.schema().as_ref().clone();
        let Resolved::Value { expr, kind } = resolve("s.a.v", &schema) else {
            panic!("s.a.v resolves to a value");
        };
        assert_eq!(kind, Kind::Number);
        let got = collect_one(&df, expr);
        let a = col("s").struct_().field_by_name("a");
        let generic = when(col("s").is_not_null().and(a.clone().is_not_null()))
            .then(a.struct_().field_by_name("v"))
            .otherwise(lit(NULL));
        let expected = collect_one(&df, generic);
        assert!(got.null_count() > 0 && got.null_count() < got.len());
        assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
        // A frame whose leaf has another type than the schema the expression was made for
        // (`filter_expr` compiles against the lake's schema): the value is cast, not misread.
        let as_float = nested_value("s", vec!["a".into(), "w".into()], DataType::Float64);
        let w_int = col("s")
            .struct_()
            .field_by_name("a")
            .struct_()
            .field_by_name("w")
            .cast(DataType::Int64);
        let a_int = df
            .clone()
            .lazy()
            .select([as_struct(vec![w_int.clone().alias("w")]).alias("a")])
            .select([as_struct(vec![col("a")]).alias("s")])
            .collect()
            .expect("an integer leaf");
        let got = collect_one(&a_int, as_float);
        let expected = collect_one(&df, w_int.cast(DataType::Float64));
        assert_eq!(got.dtype(), &DataType::Float64);
        assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
        assert!(matches!(resolve("s.a.x", &schema), Resolved::Missing));
        assert!(matches!(resolve("s.w.v", &schema), Resolved::Missing));
    }

    #[test]
    fn list_contains_equals_polars_list_contains() {
        let df = chunked_and_sliced(|seed| {
            let rows: Vec<Option<Series>> = (0..30u64)
                .map(|i| match (i + seed) % 6 {
                    0 => None,
                    1 => Some(Series::new("".into(), Vec::<&str>::new())),
                    2 => Some(Series::new("".into(), [Some("hot"), Some("new")])),
                    3 => Some(Series::new("".into(), [None, Some("hot")])),
                    4 => Some(Series::new("".into(), [Some("hop"), None, Some("ho")])),
                    _ => Some(Series::new(
                        "".into(),
                        [Some("hotter"), Some("trending"), Some("hot")],
                    )),
                })
                .collect();
            let labels: ListChunked = rows.into_iter().collect();
            DataFrame::new(
                30,
                vec![labels.into_series().with_name("labels".into()).into()],
            )
            .expect("frame")
        });
        let got = collect_one(&df, list_contains(col("labels"), "hot".to_owned()));
        let expected = collect_one(&df, col("labels").list().contains(lit("hot"), false));
        assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
        assert!(got.bool().expect("bool").any());

        // Lists of categories are compared as strings.
        let categories = DataType::List(Box::new(DataType::from_categories(Categories::global())));
        let as_categories = collect_one(&df, col("labels").cast(categories.clone()));
        assert_eq!(as_categories.dtype(), &categories);
        let frame = DataFrame::new(
            as_categories.len(),
            vec![as_categories.with_name("labels".into()).into()],
        )
        .expect("frame");
        let got = collect_one(&frame, list_contains(col("labels"), "hot".to_owned()));
        assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
    }
}
