//! The screener: the service's search-profiles request answered locally, from the profile
//! snapshots the lake keeps in `token_profiles`, and its filter language as polars expressions.
//!
//! [`search`] takes the request body as it is and answers with the service's response shape
//! `{count, cursor, data}`; [`search_lazy`] does the same over any frame of profiles. The work
//! is split so that the rules live in one place:
//!
//! * **Filters** are compiled to polars expressions over the struct columns by [`filter_expr`]
//!   (usable on any `LazyFrame` of profiles). The rules are those of [`crate::search::matches`]
//!   (semantics.md section 4), restated for typed columns: in the lake a path's type is fixed by
//!   the schema, so a string operand against a numeric column matches nothing for `$eq`/`$in`
//!   and everything for `$ne`/`$nin`; null and missing behave alike (no operand may be null); a
//!   path the schema lacks, or one that runs through a non-object, is missing. A list column
//!   (`labels`) matches when one of its elements does. A timestamp column is the string the
//!   service sends (RFC 3339, `Z`, fractional seconds only when not zero). A property test checks
//!   the compiled filter against `crate::search::matches` row by row. The compiled expression
//!   is as deep as the filter is nested, whatever its lists' lengths and clause counts: `$in`
//!   and `$nin` are one `is_in` against a Series of their operands, `$and` and `$or` are n-ary,
//!   and the conditions on one path within one `$and` or `$or` are merged (equalities into one
//!   set, bounds into the tightest or loosest), so a filter's cost is linear in its size.
//! * **Text queries** run the engine's [`TextMatcher`](crate::search::TextMatcher) over the
//!   matching rows' text fields.
//! * **Order and cursors** follow [`crate::search::compare_values`] for the column types a
//!   profile has (numbers, strings, booleans; nulls first ascending and last descending; ties by
//!   `token_address` in the sort's direction) and use the engine's keyset
//!   [`Cursor`](crate::search::Cursor), so the simulator's cursors and these are of one format.
//! * **Projection** and `dynamic_labels`: only the page's rows become JSON documents, in the
//!   service's form, and the engine's [`project`](crate::search::project) shapes them.
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
//! different. Which path answers is chosen once, from the schema, by the plan the search then
//! runs; [`search_path`] and [`search_path_lazy`] report it ([`SearchPath`]) without answering.
//!
//! A snapshot is one run of a profile sync: the rows sharing one `fetched_at`. The lake holds
//! one row per `token_address` in a snapshot, so `token_address` alone breaks ties.
//!
//! **EVM profiles** ([`search_evm`], dexlake's extension: the service searches the altchain's
//! profiles only) run through the same code over an EVM chain's snapshots (the partition
//! `chain=evm-<id>`; the same snapshot rule), with the columns an EVM profile has
//! ([`EVM_DOCUMENT_COLUMNS`]) and documents in the get-profile answer's member order. A
//! request naming a field an EVM profile lacks is refused, naming it: in the lake the altchain
//! and EVM profiles share one schema, so such a field would otherwise be found null in every
//! profile and the answer silently empty.
//!
//! What lives here, one concern per file:
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the entry points: [`search`] (an altchain snapshot of the lake), [`search_evm`] (an EVM chain's) and [`search_lazy`] (any frame of profiles); [`search_path`] and [`search_path_lazy`], the path the first and last take |
//! | `snapshot.rs` | the snapshot choice, per chain: [`ProfileSnapshot`], [`snapshots`], [`snapshots_of`], [`snapshot_time`], [`snapshot_time_of`], [`snapshot_frame`] |
//! | `evm.rs` | the EVM profiles' fields: a request naming a field they lack refused, naming it ([`check_evm_request`]) |
//! | `plan.rs` | the plan: whether the columnar path covers a request (else the engine answers it over documents), chosen from the schema and then run, so the [`SearchPath`] it reports is the one taken; and the paths the columnar path reads before the page is chosen |
//! | `columnar.rs` | the columnar path: the filter and text query over the key columns, the top-k of the sort value, keyset cursors, the page's rows from where they lie |
//! | `filter.rs` | the filter compiler: [`filter_expr`], [`filter_expr_for`], `profile_schema`; paths resolved against a schema, each operator's rule for typed columns, n-ary `$and`/`$or` with the conditions on one path merged |
//! | `kernels.rs` | the polars kernels the compiled expressions call: a nested leaf read in place, a list of strings searched in one pass |
//! | `parquet_leaves.rs` | the lake's files read with arrow-rs: only the Parquet leaves under the paths a request names, then chosen rows by row selection |
//! | `documents.rs` | rows as the service's documents (`documents`), and the columns they are made of, [`DOCUMENT_COLUMNS`] |
//! | `tests.rs` | unit tests of the kernels and of the compiled filters' depth |
//!
//! What it may import: the lake through `crate::lake` (the manifest, scans, the store), the
//! service's vocabulary through `crate::api` (models, `profile_query`, `requests`), and the
//! engine's own rules from `crate::search` (text matching, cursors, order keys, projection, and
//! the engine itself for the requests the columnar path does not cover). Never `sim`, `sync`,
//! `report` or another analytics module. Inside the folder imports run one way: `mod.rs` uses
//! `snapshot`, `plan`, `parquet_leaves`, `evm`, `documents`; `plan` uses `columnar`, `filter`,
//! `documents`; `columnar` uses `filter`, `documents`, `parquet_leaves`; `filter` uses
//! `kernels`; `snapshot` uses `documents`; `evm` uses `filter` and `documents`; `kernels`,
//! `documents` and `parquet_leaves` use no sibling. The helper column names and the request
//! error below are shared by all.

use polars::prelude::*;

use crate::api::models::ChainFamily;
use crate::api::profile_query::SearchRequest;
use crate::api::requests::Operation;
use crate::lake::read::name_damaged_file;
use crate::lake::{Dataset, Lake};
use crate::search::SearchPage;
use crate::{Error, Result};

mod columnar;
mod documents;
mod evm;
mod filter;
mod kernels;
mod parquet_leaves;
mod plan;
mod snapshot;
#[cfg(test)]
mod tests;

pub use documents::{DOCUMENT_COLUMNS, EVM_DOCUMENT_COLUMNS};
pub use filter::{filter_expr, filter_expr_for};
pub use plan::SearchPath;
pub use snapshot::{
    ProfileSnapshot, snapshot_frame, snapshot_time, snapshot_time_of, snapshots, snapshots_of,
};

use columnar::Page;
use documents::document_columns;
use plan::{plan, read_paths, search_with};
use snapshot::{document_frame, snapshot_scan};

/// The row number the search adds to a frame of profiles.
const ROW: &str = "__dexlake_row";
/// The sort value the columnar path computes.
const SORT: &str = "__dexlake_sort";
/// Whether a row passes the filter, computed beside the keys.
const KEEP: &str = "__dexlake_keep";

/// A request the screener refuses, as the service words it.
fn invalid(member: &str, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        operation: Operation::AltSearchProfiles.name(),
        member: member.to_owned(),
        reason: reason.into(),
    }
}

/// Answers a search-profiles request from an altchain profile snapshot of the lake, with the
/// service's response shape. See the [module docs](self) for how, and
/// [`crate::search::search`] for the rules of every member.
pub fn search(
    lake: &Lake,
    request: &SearchRequest,
    snapshot: ProfileSnapshot,
) -> Result<SearchPage> {
    search_snapshot(lake, ChainFamily::Altchain, request, snapshot)
        .map_err(|e| name_damaged_file(lake.base(), Dataset::TokenProfiles, e))
}

/// Answers a search-profiles request from a profile snapshot of the EVM chain `chain_id`
/// (dexlake's extension: the service searches the altchain's profiles only), with the same
/// response shape. The rules are those of [`search`], over the fields an EVM profile has:
/// `updated_at`, `synced_at`, `chain_id`, `token_address`, `metadata.<field>` and
/// `metrics.<window>.<field>` ([`EVM_DOCUMENT_COLUMNS`], with the lake's `token_profiles`
/// columns). A request naming a field an EVM profile lacks (in its filter, sort, text query or
/// dynamic labels; `options.include_labels` or `include_market`; a window of
/// `include_metrics` the lake does not store) is refused with [`Error::InvalidRequest`],
/// naming it, never answered empty.
pub fn search_evm(
    lake: &Lake,
    chain_id: i64,
    request: &SearchRequest,
    snapshot: ProfileSnapshot,
) -> Result<SearchPage> {
    search_snapshot(lake, ChainFamily::Evm(chain_id), request, snapshot)
        .map_err(evm::renamed)
        .map_err(|e| name_damaged_file(lake.base(), Dataset::TokenProfiles, e))
}

/// Refuses what [`search_evm`] refuses of a request before reading the lake: what
/// [`SearchRequest::validate`] refuses, and a field an EVM profile lacks.
pub fn check_evm_request(request: &SearchRequest) -> Result<()> {
    request.validate().map_err(evm::renamed)?;
    evm::check_fields(request, &evm::schema()?)
}

/// [`search`] or [`search_evm`], whose polars errors do not name the file they come from.
fn search_snapshot(
    lake: &Lake,
    chain: ChainFamily,
    request: &SearchRequest,
    snapshot: ProfileSnapshot,
) -> Result<SearchPage> {
    match chain {
        ChainFamily::Altchain => request.validate()?,
        ChainFamily::Evm(_) => check_evm_request(request)?,
    }
    let at = snapshot_time_of(lake, chain, snapshot)?;
    let mut frame = document_frame(lake, chain, at)?;
    // Otherwise the page's rows are read by address, a top-level column whose filter the
    // Parquet reader takes.
    let columns: Vec<Expr> = document_columns(chain).iter().map(|c| col(*c)).collect();
    let by_address = snapshot_scan(lake, chain, at)?.select(columns);
    let schema = frame
        .collect_schema()
        .map_err(Error::polars("reading the profiles' schema"))?;
    let planned = plan(frame, request, chain)?;
    if planned.path() == SearchPath::Columnar
        && let Some(keys) = parquet_leaves::read(lake, chain, at, &read_paths(request), &schema)?
    {
        // The filter, sort and text query read a few leaves of the nested columns: only those
        // are decoded, for every profile of the snapshot, and then the page's whole rows only.
        // Their frame plans as the snapshot's does (its columns are those leaves); were it not
        // so, the snapshot's own columnar plan answers below.
        let on_keys = plan(keys.frame.clone().lazy(), request, chain)?;
        if on_keys.path() == SearchPath::Columnar {
            return on_keys.run(
                request,
                Page::Located {
                    lake,
                    keys: &keys,
                    schema: &schema,
                    by_address,
                },
                chain,
            );
        }
    }
    planned.run(request, Page::ByAddress(by_address), chain)
}

/// The path [`search`] takes for the request over the snapshot, from the same plan, without
/// answering it: the lake's schema is read, not its profiles. Errors as [`search`] does for a
/// request it refuses or a snapshot the lake does not hold.
pub fn search_path(
    lake: &Lake,
    request: &SearchRequest,
    snapshot: ProfileSnapshot,
) -> Result<SearchPath> {
    let chain = ChainFamily::Altchain;
    let path = || -> Result<SearchPath> {
        let at = snapshot_time_of(lake, chain, snapshot)?;
        Ok(plan(document_frame(lake, chain, at)?, request, chain)?.path())
    };
    path().map_err(|e| name_damaged_file(lake.base(), Dataset::TokenProfiles, e))
}

/// Answers a search-profiles request over any frame of profiles with the lake's columns
/// ([`DOCUMENT_COLUMNS`] at least), one row per `token_address`.
pub fn search_lazy(profiles: LazyFrame, request: &SearchRequest) -> Result<SearchPage> {
    search_with(profiles, request, Page::ByRow, ChainFamily::Altchain)
}

/// The path [`search_lazy`] takes for the request over the frame, from the same plan, without
/// answering it: only the frame's schema is resolved.
pub fn search_path_lazy(profiles: LazyFrame, request: &SearchRequest) -> Result<SearchPath> {
    Ok(plan(profiles, request, ChainFamily::Altchain)?.path())
}
