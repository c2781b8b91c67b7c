//! [`Dataset`]: the datasets of the lake, with what the layout, the writer and the readers need
//! to know of each (folder name, time column, natural key, id column, path columns).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The datasets of the lake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dataset {
    /// Altchain swaps (interface 2.8), by `block_time`.
    Swaps,
    /// Altchain trades (interface 2.9), by `block_time`.
    Trades,
    /// Altchain OHLCV candles (interface 2.7), by `timestamp`.
    Candles,
    /// EVM price history points (interface 2.7), by `timestamp`.
    PriceHistory,
    /// Latest-price snapshots of both families, by `fetched_at`.
    Prices,
    /// Price-stats snapshots of both families, by `fetched_at`.
    PriceStats,
    /// Token-profile snapshots of both families, by `fetched_at`.
    TokenProfiles,
    /// Wallet-portfolio snapshots (altchain), by `fetched_at`.
    Portfolios,
    /// Closed bars computed from the lake's swaps as they arrived (`dexlake follow`), by
    /// `timestamp`.
    Bars,
}

impl Dataset {
    /// Every dataset, in documentation order.
    pub const ALL: [Dataset; 9] = [
        Dataset::Swaps,
        Dataset::Trades,
        Dataset::Candles,
        Dataset::PriceHistory,
        Dataset::Prices,
        Dataset::PriceStats,
        Dataset::TokenProfiles,
        Dataset::Portfolios,
        Dataset::Bars,
    ];

    /// The dataset's folder name.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::Swaps => "swaps",
            Dataset::Trades => "trades",
            Dataset::Candles => "candles",
            Dataset::PriceHistory => "price_history",
            Dataset::Prices => "prices",
            Dataset::PriceStats => "price_stats",
            Dataset::TokenProfiles => "token_profiles",
            Dataset::Portfolios => "portfolios",
            Dataset::Bars => "bars",
        }
    }

    /// The column whose UTC day names the `date=` partition and which files are sorted by.
    pub fn time_column(self) -> &'static str {
        match self {
            Dataset::Swaps | Dataset::Trades => "block_time",
            Dataset::Candles | Dataset::PriceHistory | Dataset::Bars => "timestamp",
            Dataset::Prices
            | Dataset::PriceStats
            | Dataset::TokenProfiles
            | Dataset::Portfolios => "fetched_at",
        }
    }

    /// The natural key within a partition: writing a record whose key is already committed in
    /// its partition is a no-op, or replaces it in datasets that
    /// [replace on write](Self::replaces_on_write). The partition (chain, interval, date)
    /// completes the key. Swaps and trades also keep each [`id`](Self::id_column) once across
    /// partitions.
    pub fn key_columns(self) -> &'static [&'static str] {
        match self {
            Dataset::Swaps | Dataset::Trades => &["id"],
            Dataset::Candles => &["token", "pool", "timestamp"],
            Dataset::PriceHistory => &["token_address", "pool_address", "timestamp"],
            Dataset::Prices | Dataset::PriceStats => {
                &["token_address", "pool_address", "fetched_at"]
            }
            Dataset::TokenProfiles => &["token_address", "fetched_at"],
            Dataset::Portfolios => &["wallet", "fetched_at"],
            Dataset::Bars => &["token_address", "timestamp"],
        }
    }

    /// The column that identifies a record across partitions: swaps and trades carry the
    /// service's `id`, which names one event wherever its `block_time` puts it. An id is stored
    /// once per dataset (both are altchain only, so once per chain); a write that moves an id to
    /// another `block_time` replaces the committed record in the same commit.
    pub fn id_column(self) -> Option<&'static str> {
        match self {
            Dataset::Swaps | Dataset::Trades => Some("id"),
            _ => None,
        }
    }

    /// Whether a later write of a key replaces the committed record. Candles and price-history
    /// points are revised until their interval closes, so the newest write wins; swaps,
    /// trades and snapshots never change, so the first write stays and repeats are dropped.
    pub fn replaces_on_write(self) -> bool {
        matches!(self, Dataset::Candles | Dataset::PriceHistory)
    }

    /// Whether the dataset is computed on the lake (the bars of `dexlake follow`) rather than
    /// fetched from the service.
    pub fn is_derived(self) -> bool {
        matches!(self, Dataset::Bars)
    }

    /// Record columns kept only in the hive path (between `chain=` and `date=`).
    pub fn path_columns(self) -> &'static [&'static str] {
        match self {
            Dataset::Candles | Dataset::PriceHistory | Dataset::Bars => &["interval"],
            _ => &[],
        }
    }

    /// Whether records carry `chain_id` (null for altchain records).
    pub fn has_chain_id(self) -> bool {
        matches!(
            self,
            Dataset::PriceHistory | Dataset::Prices | Dataset::PriceStats | Dataset::TokenProfiles
        )
    }
}

impl fmt::Display for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Dataset {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Dataset::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Dataset::ALL.iter().map(|d| d.name()).collect();
                Error::Config(format!(
                    "unknown dataset {s:?}; expected one of {}",
                    names.join(", ")
                ))
            })
    }
}
