//! The report's EVM part: for each chain whose price history the lake stores, its most traded
//! tokens over the last [`ReportConfig::window_seconds`] of that history, each with bars
//! resampled from the stored series, and their price stats computed from the same series.
//!
//! Everything comes from the lake's query ([`Query::price_history`](crate::query::Query::price_history)),
//! as `dexlake ohlcv --source price-history` and `dexlake price-stats --source price-history`
//! answer it; this file only picks the chains, the period and the tokens to show.

use chrono::Duration;
use polars::prelude::*;

use super::{ReportConfig, TokenSection};
use crate::analytics::TimeRange;
use crate::analytics::columns::{f64_col, i64_col, micros_col, str_col};
use crate::lake::{Dataset, Lake};
use crate::query::{Bars, LakeQuery as _};
use crate::{Error, Result};

/// One EVM chain of the report.
#[derive(Debug, Clone)]
pub struct EvmChainSection {
    /// The chain's numeric id.
    pub chain_id: i64,
    /// The period `[from, to)`: it ends with the end of the chain's newest stored point.
    pub period: TimeRange,
    /// The chain's most traded tokens in the period, most USD volume first; `events` counts
    /// their points and the bars have no buy, sell or base volume (a series carries none).
    pub tokens: Vec<TokenSection>,
    /// Price stats of those tokens at the end of the period, from their price history
    /// (the columns of [`Query::price_stats`](crate::query::Query::price_stats)).
    pub price_stats: DataFrame,
}

/// The EVM chains of the lake's price history, each with the end of its newest point (µs) and
/// the interval of that point (s), in chain order.
fn chains(lake: &Lake) -> Result<Vec<(i64, i64)>> {
    if lake.row_count(Dataset::PriceHistory)? == 0 {
        return Ok(Vec::new());
    }
    let df = lake
        .scan(Dataset::PriceHistory)?
        .group_by([col("chain_id")])
        .agg([
            col("timestamp").max().alias("newest"),
            col("interval")
                .sort_by([col("timestamp")], SortMultipleOptions::default())
                .last()
                .alias("interval"),
        ])
        .sort(["chain_id"], SortMultipleOptions::default())
        .collect()
        .map_err(Error::polars("reading the price history's chains"))?;
    let ids = i64_col(&df, "chain_id")?;
    let newest = micros_col(&df, "newest")?;
    let interval = i64_col(&df, "interval")?;
    Ok(ids
        .into_iter()
        .zip(newest)
        .zip(interval)
        .map(|((id, t), i)| (id, t + i * 1_000_000))
        .collect())
}

/// The EVM sections of the report, one per chain of the lake's price history (none when it
/// holds no price history).
pub(super) fn sections(lake: &Lake, config: &ReportConfig) -> Result<Vec<EvmChainSection>> {
    let mut out = Vec::new();
    for (chain_id, end) in chains(lake)? {
        let to = chrono::DateTime::from_timestamp_micros(end).ok_or_else(|| Error::Lake {
            path: lake.root().to_owned(),
            message: format!("price history of chain {chain_id}: a timestamp out of range"),
        })?;
        let from = to - Duration::seconds(config.window_seconds);
        let period = TimeRange {
            from: Some(from),
            to: Some(to),
        };
        let query = lake.query().price_history(chain_id).between(from, to);
        let bars = match query.bars(Bars::every(config.evm_bar_seconds)) {
            Ok(bars) => bars,
            Err(Error::NoData { .. }) => continue,
            Err(e) => return Err(e),
        };
        let tokens = top_tokens(&bars, config.top_tokens)?;
        let addresses: Vec<String> = tokens.iter().map(|t| t.token_address.clone()).collect();
        // No point ending by `to` (a history of one interval, still open) is no stats, not an
        // error: the bars are shown without their changes.
        let price_stats = match lake
            .query()
            .price_history(chain_id)
            .tokens(&addresses)
            .price_stats(Some(to))
        {
            Ok(stats) => stats,
            Err(Error::NoData { .. }) => DataFrame::empty(),
            Err(e) => return Err(e),
        };
        out.push(EvmChainSection {
            chain_id,
            period,
            tokens,
            price_stats,
        });
    }
    Ok(out)
}

/// The `n` tokens of `bars` with the most volume, each with its own bars.
fn top_tokens(bars: &DataFrame, n: usize) -> Result<Vec<TokenSection>> {
    let context = "ranking the price history's tokens";
    let totals = bars
        .clone()
        .lazy()
        .group_by([col("token_address")])
        .agg([
            col("volume").sum().alias("usd_volume"),
            col("count").cast(DataType::Int64).sum().alias("points"),
        ])
        .sort_by_exprs(
            [col("usd_volume"), col("token_address")],
            SortMultipleOptions::default().with_order_descending_multi([true, false]),
        )
        .limit(n as IdxSize)
        .collect()
        .map_err(Error::polars(context))?;
    let names = str_col(&totals, "token_address")?;
    let volumes = f64_col(&totals, "usd_volume")?;
    let points = i64_col(&totals, "points")?;
    let mut out = Vec::with_capacity(names.len());
    for ((token, usd_volume), points) in names.into_iter().zip(volumes).zip(points) {
        let own = bars
            .clone()
            .lazy()
            .filter(col("token_address").eq(lit(token)))
            .collect()
            .map_err(Error::polars(context))?;
        out.push(TokenSection {
            token_address: token.to_owned(),
            symbol: None,
            usd_volume,
            events: usize::try_from(points).unwrap_or(0),
            bars: own,
        });
    }
    Ok(out)
}
