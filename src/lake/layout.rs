//! Hive paths and partition keys:
//! `<dataset>/chain=<altchain|evm-<chain_id>>/[interval=<seconds>/]date=YYYY-MM-DD/part-<id>.parquet`.
//!
//! The hive columns (`chain`, `interval`, `date`) live only in the path, never inside the files,
//! so DuckDB, polars and pyarrow never see two columns of one name with different types.
//! `chain_id` stays inside the files of the datasets that can hold EVM records.

use chrono::NaiveDate;

use super::Dataset;
use crate::api::models::ChainFamily;
use crate::{Error, Result};

/// The `chain` partition value for records of the non-EVM family.
pub const ALTCHAIN: &str = ChainFamily::ALTCHAIN;

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
}
