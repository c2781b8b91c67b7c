//! Every path of the lake's layout, in one place: the hive paths of the data files and the
//! lake's own files under `_dexlake/` (the commit log, the journal, the lock), the temporary
//! names a file is written to before it is renamed into place, and which paths a store accepts.
//!
//! Data files:
//! `<dataset>/chain=<altchain|evm-<chain_id>>/[interval=<seconds>/]date=YYYY-MM-DD/part-<id>.parquet`.
//! The hive columns (`chain`, `interval`, `date`) live only in the path, never inside the files,
//! so DuckDB, polars and pyarrow never see two columns of one name with different types.
//! `chain_id` stays inside the files of the datasets that can hold EVM records.
//!
//! The lake's own files:
//!
//! ```text
//! _dexlake/log/<version, 20 digits>.json      one commit (the commit log)
//! _dexlake/checkpoint/<version>.state.json    the sync state as of a version
//! _dexlake/checkpoint/<version>.files.json    the committed files as of a version
//! _dexlake/_last_checkpoint.json              which checkpoint is the newest
//! _dexlake/journal.json                       the commit in progress (folders only)
//! _dexlake/lock                               the writer lock (folders only)
//! _dexlake/manifest.json, manifest.prev.json  the manifest of lakes from before the log
//! ```

use std::path::PathBuf;

use chrono::NaiveDate;

use super::dataset::Dataset;
use crate::api::models::ChainFamily;
use crate::{Error, Result};

/// One partition (leaf folder) of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Partition {
    /// The dataset.
    pub dataset: Dataset,
    /// The `chain=` value.
    pub chain: ChainFamily,
    /// The `interval=` value in seconds, for candles and price history.
    pub interval: Option<i64>,
    /// The `date=` value: the UTC day of the dataset's time column.
    pub date: NaiveDate,
}

impl Partition {
    /// The folder of the partition, relative to the lake root, without a trailing `/`.
    pub fn dir(&self) -> String {
        let mut s = format!("{}/chain={}", self.dataset.name(), self.chain);
        if let Some(i) = self.interval {
            s.push_str(&format!("/interval={i}"));
        }
        s.push_str(&format!("/date={}", self.date.format("%Y-%m-%d")));
        s
    }

    /// Parses the partition of a data file's relative path, checking the levels the dataset
    /// expects.
    pub fn from_file_path(path: &str) -> Result<Partition> {
        let bad = |why: String| Error::Lake {
            path: path.into(),
            message: format!("not a data file path of the lake layout: {why}"),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let dataset: Dataset = parts
            .first()
            .ok_or_else(|| bad("empty path".into()))?
            .parse()
            .map_err(|e: Error| bad(e.to_string()))?;
        let expected = 4 + dataset.path_columns().len();
        if parts.len() != expected {
            return Err(bad(format!(
                "expected {expected} path levels, found {}",
                parts.len()
            )));
        }
        let value = |level: &str, key: &str| -> Result<String> {
            level
                .strip_prefix(key)
                .and_then(|v| v.strip_prefix('='))
                .map(str::to_owned)
                .ok_or_else(|| bad(format!("expected `{key}=...`, found {level:?}")))
        };
        let chain: ChainFamily = value(parts[1], "chain")?.parse().map_err(bad)?;
        let interval = if dataset.path_columns().is_empty() {
            None
        } else {
            let v = value(parts[2], "interval")?;
            Some(
                v.parse::<i64>()
                    .map_err(|e| bad(format!("interval {v:?}: {e}")))?,
            )
        };
        let d = value(parts[expected - 2], "date")?;
        let date = NaiveDate::parse_from_str(&d, "%Y-%m-%d")
            .map_err(|e| bad(format!("date {d:?}: {e}")))?;
        let file = parts[expected - 1];
        if !file.ends_with(".parquet") {
            return Err(bad(format!("file {file:?} does not end in .parquet")));
        }
        Ok(Partition {
            dataset,
            chain,
            interval,
            date,
        })
    }
}

/// The file name of a new data file: unique by commit version, sequence and a random tag.
pub fn data_file_name(version: u64, seq: usize) -> String {
    let tag: u32 = rand::random();
    format!("part-{version:08}-{seq:04}-{tag:08x}.parquet")
}

/// Checks that `path` is a path of the lake's layout: relative, `/`-separated, without empty,
/// `.` or `..` segments, backslashes or NUL bytes, and under a dataset folder or `_dexlake/`.
/// The empty path (the root) is accepted only as a prefix of [`Store::list`](super::Store::list).
pub fn check_path(path: &str) -> Result<()> {
    let refuse = |why: &str| {
        Err(Error::Lake {
            path: PathBuf::from(path),
            message: format!("refused: {why}"),
        })
    };
    if path.is_empty() {
        return refuse("an empty path");
    }
    if path.starts_with('/') {
        return refuse("an absolute path; lake paths are relative to the lake root");
    }
    if path.contains(['\\', '\0']) {
        return refuse("a backslash or NUL byte in a lake path");
    }
    if path
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return refuse("an empty, `.` or `..` segment; lake paths never leave their folder");
    }
    let top = path.split('/').next().unwrap_or_default();
    if top != META_DIR && !Dataset::ALL.iter().any(|d| d.name() == top) {
        return refuse("not under a dataset folder or `_dexlake/`");
    }
    Ok(())
}

/// The name [`Store::put`](super::Store::put) writes to before renaming: hidden and not ending in
/// `.parquet`, so that `**/*.parquet` globs of DuckDB, polars and pyarrow never pick it up.
pub fn temp_name(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}.tmp"),
        None => format!(".{path}.tmp"),
    }
}

/// Folder of the lake's own files; it never holds a `.parquet` file.
pub const META_DIR: &str = "_dexlake";
/// Folder of the log entries.
pub const LOG_DIR: &str = "_dexlake/log";
/// Folder of the checkpoints.
pub const CHECKPOINT_DIR: &str = "_dexlake/checkpoint";
/// Folder of the history files: the records of the commits up to each checkpoint.
pub const HISTORY_DIR: &str = "_dexlake/history";
/// Names the newest checkpoint.
pub const LAST_CHECKPOINT_PATH: &str = "_dexlake/_last_checkpoint.json";
/// The journal of the commit in progress, relative to the lake root.
pub const JOURNAL_PATH: &str = "_dexlake/journal.json";
/// The writer lock file, relative to the lake root.
pub const LOCK_PATH: &str = "_dexlake/lock";
/// The single manifest document of lakes written before the commit log: read as the
/// checkpoint of its version, replaced by the log at the next commit.
pub const MANIFEST_PATH: &str = "_dexlake/manifest.json";
/// The manifest before the latest commit, beside [`MANIFEST_PATH`] in lakes written before the
/// commit log.
pub const PREVIOUS_MANIFEST_PATH: &str = "_dexlake/manifest.prev.json";

/// The log entry of commit `version`.
pub fn entry_path(version: u64) -> String {
    format!("{LOG_DIR}/{version:020}.json")
}

/// The state part of the checkpoint at `version`.
pub fn state_checkpoint_path(version: u64) -> String {
    format!("{CHECKPOINT_DIR}/{version:020}.state.json")
}

/// The file-list part of the checkpoint at `version`.
pub fn files_checkpoint_path(version: u64) -> String {
    format!("{CHECKPOINT_DIR}/{version:020}.files.json")
}

/// The history file written with the checkpoint at `version`.
pub fn history_path(version: u64) -> String {
    format!("{HISTORY_DIR}/{version:020}.json")
}

/// The version in the name of a log entry or checkpoint file.
pub fn version_of(path: &str) -> Option<u64> {
    let name = path.rsplit('/').next()?;
    let digits = name.split('.').next()?;
    if digits.len() != 20 || name.starts_with('.') {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_paths_round_trip() {
        let p = Partition {
            dataset: Dataset::Candles,
            chain: ChainFamily::Altchain,
            interval: Some(60),
            date: NaiveDate::from_ymd_opt(2024, 3, 9).expect("valid date"),
        };
        assert_eq!(
            p.dir(),
            "candles/chain=altchain/interval=60/date=2024-03-09"
        );
        let file = format!("{}/{}", p.dir(), data_file_name(3, 0));
        assert_eq!(Partition::from_file_path(&file).expect("parses"), p);

        let q = Partition {
            dataset: Dataset::Prices,
            chain: ChainFamily::Evm(8453),
            interval: None,
            date: NaiveDate::from_ymd_opt(2025, 12, 31).expect("valid date"),
        };
        assert_eq!(q.dir(), "prices/chain=evm-8453/date=2025-12-31");
        let file = format!("{}/part-1.parquet", q.dir());
        assert_eq!(Partition::from_file_path(&file).expect("parses"), q);
    }

    #[test]
    fn bad_paths_are_errors() {
        for p in [
            "nope/chain=altchain/date=2024-01-01/x.parquet",
            "swaps/chain=solana/date=2024-01-01/x.parquet",
            "swaps/chain=altchain/date=2024-13-01/x.parquet",
            "swaps/chain=altchain/date=2024-01-01/x.parquet.tmp",
            "candles/chain=altchain/date=2024-01-01/x.parquet",
        ] {
            assert!(
                Partition::from_file_path(p).is_err(),
                "{p} should not parse"
            );
        }
    }

    #[test]
    fn temp_names_are_hidden_and_not_parquet() {
        let t = temp_name("swaps/chain=altchain/date=2024-01-01/part-1.parquet");
        assert_eq!(
            t,
            "swaps/chain=altchain/date=2024-01-01/.part-1.parquet.tmp"
        );
        assert!(!t.ends_with(".parquet"));
    }
}
