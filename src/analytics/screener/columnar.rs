//! The columnar path: the filter evaluated as a column beside the sort keys, the text query over
//! the matching rows, a top-k of the sort value, the engine's keyset cursors, and the page's rows
//! read from where they lie (the searched frame, the lake's files, or a scan by address).

use std::collections::HashMap;

use polars::prelude::*;
use serde_json::Value;

use super::documents::{documents, documents_at};
use super::filter::{Kind, Resolved, TIMESTAMP_FORMAT, distinct_paths, filter_paths, resolve};
use super::parquet_leaves::Keys;
use super::{KEEP, ROW, SORT, invalid};
use crate::api::models::ChainFamily;
use crate::api::profile_query::SearchRequest;
use crate::api::requests::DEFAULT_LIMIT;
use crate::lake::Lake;
use crate::lake::cols::{profile, token};
use crate::search::{Cursor, OrderKey, Projection, SearchPage, SortKey, SortSpec, TextMatcher};
use crate::{Error, Result};

/// Up to this many candidates for a page read from the lake's files, their page columns are
/// read in one pass with their addresses.
const PREFETCH_ROWS: usize = 1_000;

/// The dotted paths a page's documents need: the members always returned (and an EVM
/// profile's `chain_id`, which its model requires), the sections the options ask for, and the
/// dynamic labels' filters.
fn page_paths(request: &SearchRequest, chain: ChainFamily) -> Vec<String> {
    let mut out: Vec<String> = [profile::UPDATED_AT, profile::SYNCED_AT, token::TOKEN]
        .map(str::to_owned)
        .to_vec();
    if let ChainFamily::Evm(_) = chain {
        out.push(profile::CHAIN_ID.to_owned());
    }
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
    distinct_paths(out)
}

/// Where the columnar path reads the page's whole rows from.
pub(super) enum Page<'a> {
    /// The searched frame itself, by row number.
    ByRow,
    /// This frame of the snapshot, by `token_address` (a top-level column whose filter the
    /// Parquet reader takes).
    ByAddress(LazyFrame),
    /// The lake's files, at the rows the key columns were read from; by address when a column
    /// has a type the file reader does not convert.
    Located {
        lake: &'a Lake,
        keys: &'a Keys,
        schema: &'a Schema,
        by_address: LazyFrame,
    },
}

#[expect(
    clippy::too_many_arguments,
    reason = "one private step of search_lazy, its inputs named"
)]
pub(super) fn columnar(
    profiles: LazyFrame,
    source: Page<'_>,
    request: &SearchRequest,
    schema: &Schema,
    predicate: Expr,
    sort: &SortSpec,
    (sort_expr, rank, kind): (Expr, u8, Kind),
    chain: ChainFamily,
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
    let late_address = !schema.contains(token::TOKEN);
    let mut key_columns = vec![col(ROW), sort_value(sort_expr, kind).alias(SORT)];
    if !late_address {
        key_columns.push(col(token::TOKEN));
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
        .map_err(Error::polars("filtering profiles"))?;
    let keep = evaluated
        .column(KEEP)
        .and_then(|c| c.bool())
        .map_err(Error::polars("filtering profiles"))?
        .clone();
    let mut keys = evaluated
        .filter(&keep)
        .and_then(|df| df.drop(KEEP))
        .map_err(Error::polars("filtering profiles"))?;
    if let Some(t) = &text {
        let mut columns = Vec::with_capacity(text_columns.len());
        for name in &text_columns {
            let column = keys.column(name).map_err(Error::polars("text query"))?;
            columns.push(column.str().map_err(Error::polars("text query"))?.clone());
        }
        let mask: BooleanChunked = (0..keys.height())
            .map(|i| {
                columns
                    .iter()
                    .any(|c| c.get(i).is_some_and(|v| t.matches_field(v)))
            })
            .collect();
        keys = keys.filter(&mask).map_err(Error::polars("text query"))?;
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
            .map_err(Error::polars("sorting profiles"))?;
        if top.height() > limit {
            let sorted = top
                .column(SORT)
                .map_err(Error::polars("sorting profiles"))?;
            let (beyond, _) = beyond_and_tie(&sort_key(sorted, limit), rank, descending);
            keys = keys
                .lazy()
                .filter(beyond.not())
                .collect()
                .map_err(Error::polars("sorting profiles"))?;
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
                .map_err(Error::polars("applying the cursor"))?;
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
            .map_err(Error::polars("reading the matches' addresses"))?;
        let rows: Vec<IdxSize> = rows.into_no_null_iter().collect();
        // Few candidates (no long run of ties at the page's end): their page columns are read
        // in the same pass as their addresses, and the page is taken from them.
        if !rows.is_empty() && rows.len() <= PREFETCH_ROWS {
            prefetched = located
                .rows(lake, &rows, &page_paths(request, chain), whole)?
                .map(|frame| (rows.clone(), frame));
        }
        let addresses = match &prefetched {
            Some((_, frame)) => frame
                .column(token::TOKEN)
                .map_err(Error::polars("reading the matches' addresses"))?
                .clone(),
            None if rows.is_empty() => Column::new_empty(token::TOKEN.into(), &DataType::String),
            None => located
                .rows(lake, &rows, &[token::TOKEN.to_owned()], whole)?
                .ok_or_else(|| Error::Lake {
                    path: lake.root().to_owned(),
                    message: "the profiles' token_address column has an unexpected type".into(),
                })?
                .column(token::TOKEN)
                .map_err(Error::polars("reading the matches' addresses"))?
                .clone(),
        };
        keys.with_column(addresses)
            .map_err(Error::polars("reading the matches' addresses"))?;
    }
    let mut page = keys.lazy();
    if let Some(last) = &last {
        page = page.filter(after(last, rank, descending)?);
    }
    let page = page
        .sort_by_exprs([col(SORT), col(token::TOKEN)], order())
        .limit(IdxSize::try_from(limit + 1).expect("a page limit fits in IdxSize"))
        .collect()
        .map_err(Error::polars("sorting profiles"))?;

    let rows = page
        .column(ROW)
        .map_err(Error::polars("sorting profiles"))?
        .idx()
        .map_err(Error::polars("sorting profiles"))?
        .clone();
    let shown = page.height().min(limit);
    let next = if page.height() > limit {
        let i = shown - 1;
        let addresses = page.column(token::TOKEN).map_err(Error::polars("cursor"))?;
        let address = match addresses.get(i).map_err(Error::polars("cursor"))? {
            AnyValue::String(s) => s.to_owned(),
            AnyValue::StringOwned(s) => s.to_string(),
            _ => String::new(),
        };
        let key = OrderKey {
            value: sort_key(page.column(SORT).map_err(Error::polars("cursor"))?, i),
            token_address: SortKey::Str(address.into()),
            ordinal: u64::from(rows.get(i).unwrap_or_default()),
        };
        Some(Cursor::encode(sort, &key))
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
        let docs = documents_at(frame, positions, chain)?;
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
        source = match keys.rows(lake, &wanted, &page_paths(request, chain), schema)? {
            Some(rows) => return Ok(answer(count, next, &documents(&rows, chain)?, request)),
            None => Page::ByAddress(by_address),
        };
    }
    let docs = if wanted.is_empty() {
        Vec::new()
    } else if let Page::ByAddress(frame) = source {
        let page_addresses = page
            .column(token::TOKEN)
            .map_err(Error::polars("reading the page's profiles"))?
            .str()
            .map_err(Error::polars("reading the page's profiles"))?
            .slice(0, shown);
        let picked = frame
            .filter(col(token::TOKEN).is_in(
                lit(page_addresses.clone().into_series()).implode(false),
                false,
            ))
            .collect()
            .map_err(Error::polars("reading the page's profiles"))?;
        let docs = documents(&picked, chain)?;
        let by_address: HashMap<&str, &Value> = docs
            .iter()
            .filter_map(|d| Some((d.get(token::TOKEN)?.as_str()?, d)))
            .collect();
        (0..shown)
            .filter_map(|i| by_address.get(page_addresses.get(i)?).copied().cloned())
            .collect()
    } else {
        // Each row read in place by number: filtering the frame by a mask, or gathering from
        // it, would visit (or first rechunk) every nested leaf array for the page's few.
        let all = profiles
            .collect()
            .map_err(Error::polars("reading the page's profiles"))?;
        documents_at(&all, wanted.iter().map(|&row| row as usize), chain)?
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
    let projection = Projection::new(request);
    SearchPage {
        count,
        cursor,
        data: docs.iter().map(|doc| projection.apply(doc)).collect(),
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
fn after(last: &OrderKey<'_>, rank: u8, descending: bool) -> Result<Expr> {
    let SortKey::Str(last_address) = &last.token_address else {
        return Err(invalid(
            "cursor",
            "does not hold a token_address; pass the cursor of a previous page",
        ));
    };
    let address = col(token::TOKEN);
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
