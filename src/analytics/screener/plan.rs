//! The plan: a request runs on the columnar path when its filter compiles to an expression over
//! the profiles' schema and its sort value is a scalar column; otherwise the engine answers it
//! over the whole documents. Also the paths the columnar path reads before the page is chosen.

use polars::prelude::*;

use super::columnar::{Page, columnar};
use super::documents::{document_columns, documents};
use super::filter::{Kind, Resolved, compile, distinct_paths, filter_paths, resolve};
use crate::api::models::ChainFamily;
use crate::api::profile_query::SearchRequest;
use crate::search::{SearchPage, SortSpec, TextMatcher};
use crate::{Error, Result};

/// Whether the columnar path answers the request over profiles of `schema` (else the engine
/// does, over whole documents).
pub(super) fn columnar_covers(request: &SearchRequest, schema: &Schema) -> Result<bool> {
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
pub(super) fn read_paths(request: &SearchRequest) -> Vec<String> {
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
    distinct_paths(out)
}

/// The search over `chain`'s profiles; `page` says where the page's whole rows are read from.
pub(super) fn search_with(
    profiles: LazyFrame,
    request: &SearchRequest,
    page: Page<'_>,
    chain: ChainFamily,
) -> Result<SearchPage> {
    request.validate()?;
    let mut profiles = profiles;
    let schema = profiles
        .collect_schema()
        .map_err(Error::polars("reading the profiles' schema"))?;
    let columns = document_columns(chain);
    let keep: Vec<Expr> = columns
        .iter()
        .filter(|c| schema.contains(c))
        .map(|c| col(*c))
        .collect();
    let profiles = profiles.select(keep);
    let schema: Schema = schema
        .iter()
        .filter(|(name, _)| columns.contains(&name.as_str()))
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
            profiles,
            page,
            request,
            &schema,
            predicate,
            &sort,
            (sort_expr, rank, kind),
            chain,
        ),
        _ => by_engine(profiles, request, chain),
    }
}

/// The engine over every document of the frame: for requests the columnar path does not cover.
fn by_engine(
    profiles: LazyFrame,
    request: &SearchRequest,
    chain: ChainFamily,
) -> Result<SearchPage> {
    let df = profiles
        .collect()
        .map_err(Error::polars("reading the profiles"))?;
    let docs = documents(&df, chain)?;
    crate::search::search(request, &docs)
}
