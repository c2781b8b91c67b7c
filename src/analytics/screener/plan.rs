//! The plan: a request runs on the columnar path when its filter compiles to an expression over
//! the profiles' schema and its sort value is a scalar column; otherwise the engine answers it
//! over the whole documents. [`plan`] makes that choice from the frame's schema alone, and the
//! search runs the [`Plan`] it returns, so the [`SearchPath`] a plan reports is the one its
//! answer takes. Also the paths the columnar path reads before the page is chosen.

use polars::prelude::*;

use super::columnar::{Page, columnar};
use super::documents::{document_columns, documents};
use super::filter::{Kind, Resolved, compile, distinct_paths, filter_paths, resolve};
use crate::api::models::ChainFamily;
use crate::api::profile_query::SearchRequest;
use crate::search::{SearchPage, SortSpec, TextMatcher};
use crate::{Error, Result};

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

/// Which path answers a search-profiles request: the columnar one, or the engine over whole
/// documents. [`search_path`](super::search_path) and
/// [`search_path_lazy`](super::search_path_lazy) say which one [`search`](super::search) and
/// [`search_lazy`](super::search_lazy) take, from the same plan they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchPath {
    /// The filter, sort and text query evaluated over the profiles' columns; only the page's
    /// rows become documents.
    Columnar,
    /// The engine, [`crate::search::search`], over every profile of the snapshot as a
    /// document: for a sort on an object or an array (`market`, `labels`), or a filter reading
    /// inside `matched_labels`.
    Engine,
}

/// A search planned over a frame of profiles: the frame's document columns, and the columnar
/// path's compiled inputs when it covers the request (else the engine answers). Planning reads
/// the frame's schema only; [`Plan::run`] answers.
pub(super) struct Plan {
    /// The frame's document columns.
    profiles: LazyFrame,
    /// The columnar path's inputs, or `None` for the engine.
    columnar: Option<Columnar>,
}

/// What the columnar path runs with.
struct Columnar {
    /// The schema of the document columns.
    schema: Schema,
    /// The compiled filter.
    predicate: Expr,
    /// The sort value, its rank among the column types and its kind.
    sort_column: (Expr, u8, Kind),
}

/// Plans the search over `chain`'s profiles: the columnar path when the request's filter
/// compiles to an expression over the frame's document columns and its sort value is a scalar
/// column (or missing); otherwise the engine.
pub(super) fn plan(
    profiles: LazyFrame,
    request: &SearchRequest,
    chain: ChainFamily,
) -> Result<Plan> {
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
    let sort_column = match resolve(&SortSpec::of(request).field, &schema) {
        Resolved::Value { expr, kind, .. } => kind.sort_rank().map(|rank| (expr, rank, kind)),
        Resolved::Missing => Some((lit(NULL), 0, Kind::Number)),
        Resolved::Unsupported => None,
    };
    let columnar = match (predicate, sort_column) {
        (Some(predicate), Some(sort_column)) => Some(Columnar {
            schema,
            predicate,
            sort_column,
        }),
        _ => None,
    };
    Ok(Plan { profiles, columnar })
}

impl Plan {
    /// The path this plan takes.
    pub(super) fn path(&self) -> SearchPath {
        match self.columnar {
            Some(_) => SearchPath::Columnar,
            None => SearchPath::Engine,
        }
    }

    /// Answers the request; `page` says where the columnar path reads the page's whole rows
    /// from (the engine reads every document of the frame).
    pub(super) fn run(
        self,
        request: &SearchRequest,
        page: Page<'_>,
        chain: ChainFamily,
    ) -> Result<SearchPage> {
        match self.columnar {
            Some(Columnar {
                schema,
                predicate,
                sort_column,
            }) => columnar(
                self.profiles,
                page,
                request,
                &schema,
                predicate,
                &SortSpec::of(request),
                sort_column,
                chain,
            ),
            None => by_engine(self.profiles, request, chain),
        }
    }
}

/// The search over `chain`'s profiles, planned and run; `page` says where the page's whole
/// rows are read from.
pub(super) fn search_with(
    profiles: LazyFrame,
    request: &SearchRequest,
    page: Page<'_>,
    chain: ChainFamily,
) -> Result<SearchPage> {
    plan(profiles, request, chain)?.run(request, page, chain)
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
