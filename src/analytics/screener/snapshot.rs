//! The snapshot choice: which `fetched_at` of a chain's profiles (the altchain's, or one EVM
//! chain's) a search runs on, the snapshots the lake holds, and the frame of one snapshot's
//! documents. One rule for every chain: the newest snapshot, or the one fetched at exactly the
//! time named.

use chrono::{DateTime, Utc};
use polars::prelude::*;

use super::ROW;
use super::documents::{datetime_of, document_columns};
use crate::api::models::ChainFamily;
use crate::lake::cols::profile;
use crate::lake::read::{name_damaged_file, scan_files};
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// Which snapshot of the profiles a search runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProfileSnapshot {
    /// The newest `fetched_at`.
    #[default]
    Latest,
    /// The snapshot fetched at exactly this time.
    At(DateTime<Utc>),
}

/// The times of the altchain profile snapshots the lake holds, oldest first.
pub fn snapshots(lake: &Lake) -> Result<Vec<DateTime<Utc>>> {
    snapshots_of(lake, ChainFamily::Altchain)
}

/// The times of the profile snapshots of `chain` the lake holds, oldest first.
pub fn snapshots_of(lake: &Lake, chain: ChainFamily) -> Result<Vec<DateTime<Utc>>> {
    // A file's manifest entry holds the range of its `fetched_at`: a file of one snapshot
    // (what a sync writes) names it without being read. Only files that compaction merged
    // from several snapshots are read, their `fetched_at` column alone.
    let manifest = lake.snapshot()?;
    let prefix = format!("{}/chain={chain}/", Dataset::TokenProfiles.name());
    let mut held = std::collections::BTreeSet::new();
    let mut mixed = Vec::new();
    for (path, entry) in manifest.files_of(Dataset::TokenProfiles) {
        if !path.starts_with(&prefix) {
            continue;
        }
        if entry.min_time == entry.max_time {
            held.insert(entry.min_time);
        } else {
            mixed.push((path, entry));
        }
    }
    if !mixed.is_empty() {
        let df = scan_files(lake.base(), Dataset::TokenProfiles, mixed)?
            .select([col(profile::FETCHED_AT)])
            .unique(None, UniqueKeepStrategy::Any)
            .collect()
            .map_err(Error::polars("listing profile snapshots"))
            .map_err(|e| name_damaged_file(lake.base(), Dataset::TokenProfiles, e))?;
        let times = df
            .column(profile::FETCHED_AT)
            .map_err(Error::polars("listing profile snapshots"))?;
        for i in 0..times.len() {
            match times
                .get(i)
                .map_err(Error::polars("listing profile snapshots"))?
            {
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

fn profiles_of(lake: &Lake, chain: ChainFamily) -> Result<LazyFrame> {
    Ok(lake
        .scan(Dataset::TokenProfiles)?
        .filter(col("chain").eq(lit(chain.to_string()))))
}

/// The `fetched_at` of the altchain snapshot a caller names, checked against those the lake
/// holds.
pub fn snapshot_time(lake: &Lake, snapshot: ProfileSnapshot) -> Result<DateTime<Utc>> {
    snapshot_time_of(lake, ChainFamily::Altchain, snapshot)
}

/// The `fetched_at` of the snapshot of `chain`'s profiles a caller names, checked against
/// those the lake holds.
pub fn snapshot_time_of(
    lake: &Lake,
    chain: ChainFamily,
    snapshot: ProfileSnapshot,
) -> Result<DateTime<Utc>> {
    let held = snapshots_of(lake, chain)?;
    // The altchain's messages name no chain, as they always have.
    let (of_chain, hint) = match chain {
        ChainFamily::Altchain => (String::new(), "sync the profiles first".to_owned()),
        ChainFamily::Evm(id) => (
            format!(" of chain {id}"),
            format!("sync them with `dexlake sync profiles --chain-id {id} --tokens A,B`"),
        ),
    };
    let list = || {
        held.iter()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(match snapshot {
        ProfileSnapshot::Latest => *held.last().ok_or_else(|| Error::NoData {
            what: format!(
                "lake {}: holds no {chain} token_profiles snapshot; {hint}",
                lake.named_root().display()
            ),
        })?,
        ProfileSnapshot::At(t) if held.contains(&t) => t,
        ProfileSnapshot::At(t) => {
            return Err(Error::NoData {
                what: format!(
                    "lake {}: holds no token_profiles snapshot{of_chain} fetched at {}; it holds: {}",
                    lake.named_root().display(),
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

/// The altchain profile documents of one snapshot as a lazy frame of [`DOCUMENT_COLUMNS`](super::DOCUMENT_COLUMNS).
/// Errors when the lake holds no snapshot, or not the one named (the error lists those it
/// holds).
pub fn snapshot_frame(lake: &Lake, snapshot: ProfileSnapshot) -> Result<LazyFrame> {
    let chain = ChainFamily::Altchain;
    document_frame(lake, chain, snapshot_time_of(lake, chain, snapshot)?)
}

/// The documents of `chain`'s snapshot fetched at `at`: the columns of its profiles
/// ([`DOCUMENT_COLUMNS`](super::DOCUMENT_COLUMNS) for the altchain, [`EVM_DOCUMENT_COLUMNS`](super::EVM_DOCUMENT_COLUMNS)
/// for an EVM chain).
pub(super) fn document_frame(
    lake: &Lake,
    chain: ChainFamily,
    at: DateTime<Utc>,
) -> Result<LazyFrame> {
    // The row index stops later filters from being pushed into the Parquet reader: polars 0.55
    // panics there on a predicate over a field of a struct that holds a timestamp
    // (`metadata.symbol`). The snapshot's own filter is still pushed down and prunes files.
    Ok(snapshot_scan(lake, chain, at)?
        .with_row_index(ROW, None)
        .select(
            document_columns(chain)
                .iter()
                .map(|c| col(*c))
                .collect::<Vec<_>>(),
        ))
}

/// The rows of `chain`'s snapshot fetched at `at`, every column, filters pushed into the scan.
pub(super) fn snapshot_scan(
    lake: &Lake,
    chain: ChainFamily,
    at: DateTime<Utc>,
) -> Result<LazyFrame> {
    let fetched = col(profile::FETCHED_AT)
        .cast(DataType::Int64)
        .eq(lit(at.timestamp_micros()));
    Ok(profiles_of(lake, chain)?.filter(col("date").eq(lit(at.date_naive())).and(fetched)))
}
