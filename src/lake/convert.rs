//! Conversion of the client's models to Arrow record batches: pure, sync, one function per
//! dataset and family. Each batch has exactly the dataset's [`record_schema`].
//!
//! Unknown enum values are kept as their wire strings. Metrics windows other than the six
//! documented ones, and ROI buckets other than the five documented ones, have no column and are
//! left out.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
    StructArray, TimestampMicrosecondArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Fields};
use chrono::{DateTime, Utc};

use super::dataset::Dataset;
use super::schema::{
    self, matched_label_fields, metadata_fields, metric_windows, portfolio_token_fields,
    record_schema, roi_distribution_fields, window_metrics_fields,
};
use crate::api::models::{
    AltPrice, AltPriceStats, AltTokenProfile, Candle, EvmPrice, EvmPriceStats, EvmTokenProfile,
    Market, MetricsByWindow, Portfolio, PriceChanges, PriceHistorySeries, ROI_BUCKETS, Swap,
    TimeWindow, TokenMetadata, Trade, WindowMetrics,
};
use crate::{Error, Result};

fn ts<I: IntoIterator<Item = Option<DateTime<Utc>>>>(it: I) -> ArrayRef {
    Arc::new(
        it.into_iter()
            .map(|t| t.map(|t| t.timestamp_micros()))
            .collect::<TimestampMicrosecondArray>()
            .with_timezone("UTC"),
    )
}

fn ts_req<'a, T: 'a, F: Fn(&T) -> DateTime<Utc>>(rows: &'a [T], f: F) -> ArrayRef {
    ts(rows.iter().map(|r| Some(f(r))))
}

fn strs<'a, I: IntoIterator<Item = Option<&'a str>>>(it: I) -> ArrayRef {
    Arc::new(it.into_iter().collect::<StringArray>())
}

/// A string column of every row, its buffer sized once (the strings are read twice).
fn str_req<'a, T, F: Fn(&'a T) -> &'a str>(rows: &'a [T], f: F) -> ArrayRef {
    let bytes = rows.iter().map(|r| f(r).len()).sum();
    let mut column = StringBuilder::with_capacity(rows.len(), bytes);
    for r in rows {
        column.append_value(f(r));
    }
    Arc::new(column.finish())
}

fn i64s<I: IntoIterator<Item = Option<i64>>>(it: I) -> ArrayRef {
    Arc::new(it.into_iter().collect::<Int64Array>())
}

fn i64_req<T, F: Fn(&T) -> i64>(rows: &[T], f: F) -> ArrayRef {
    Arc::new(rows.iter().map(f).collect::<Int64Array>())
}

fn f64s<I: IntoIterator<Item = Option<f64>>>(it: I) -> ArrayRef {
    Arc::new(it.into_iter().collect::<Float64Array>())
}

fn f64_req<T, F: Fn(&T) -> f64>(rows: &[T], f: F) -> ArrayRef {
    Arc::new(rows.iter().map(f).collect::<Float64Array>())
}

fn arrow_err(context: &str) -> impl FnOnce(arrow_schema::ArrowError) -> Error + '_ {
    move |source| Error::Arrow {
        context: context.to_owned(),
        source,
    }
}

/// A struct array from its children; `valid` marks which rows are present (all when `None`).
fn struct_array(
    fields: Fields,
    children: Vec<ArrayRef>,
    valid: Option<Vec<bool>>,
    context: &str,
) -> Result<ArrayRef> {
    let nulls = valid.map(NullBuffer::from);
    Ok(Arc::new(
        StructArray::try_new(fields, children, nulls).map_err(arrow_err(context))?,
    ))
}

/// A list array whose element `i` spans `lengths[i]` values of `values`; `None` lengths are
/// null lists.
fn list_array(
    item: DataType,
    lengths: &[Option<usize>],
    values: ArrayRef,
    context: &str,
) -> Result<ArrayRef> {
    let offsets = OffsetBuffer::<i32>::from_lengths(lengths.iter().map(|l| l.unwrap_or(0)));
    let nulls = if lengths.iter().any(Option::is_none) {
        Some(NullBuffer::from(
            lengths.iter().map(Option::is_some).collect::<Vec<_>>(),
        ))
    } else {
        None
    };
    let field = Arc::new(arrow_schema::Field::new_list_field(item, true));
    Ok(Arc::new(
        ListArray::try_new(field, offsets, values, nulls).map_err(arrow_err(context))?,
    ))
}

fn string_lists(lists: &[Option<&[String]>], context: &str) -> Result<ArrayRef> {
    let lengths: Vec<Option<usize>> = lists.iter().map(|l| l.map(<[String]>::len)).collect();
    let values = strs(
        lists
            .iter()
            .flatten()
            .flat_map(|l| l.iter().map(|s| Some(s.as_str()))),
    );
    list_array(DataType::Utf8, &lengths, values, context)
}

fn batch(dataset: Dataset, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    RecordBatch::try_new(record_schema(dataset), columns).map_err(arrow_err(dataset.name()))
}

/// Swaps (interface 2.8) to a `swaps` batch.
pub fn swaps_to_batch<S: AsRef<str>>(swaps: &[Swap<S>]) -> Result<RecordBatch> {
    let s = swaps;
    batch(
        Dataset::Swaps,
        vec![
            i64_req(s, |r| r.id),
            str_req(s, |r| r.swap_type.as_str()),
            str_req(s, |r| r.protocol.as_ref()),
            str_req(s, |r| r.wallet_address.as_ref()),
            str_req(s, |r| r.pool_address.as_ref()),
            str_req(s, |r| r.token_address_in.as_ref()),
            str_req(s, |r| r.token_address_out.as_ref()),
            f64_req(s, |r| r.token_amount_in),
            f64_req(s, |r| r.token_amount_out),
            f64_req(s, |r| r.token_price_in),
            f64_req(s, |r| r.token_price_out),
            f64_req(s, |r| r.pre_token_balance_in),
            f64_req(s, |r| r.pre_token_balance_out),
            f64_req(s, |r| r.post_token_balance_in),
            f64_req(s, |r| r.post_token_balance_out),
            f64_req(s, |r| r.usd_amount_in),
            f64_req(s, |r| r.usd_amount_out),
            i64_req(s, |r| r.block_slot),
            ts_req(s, |r| r.block_time),
            str_req(s, |r| r.tx_hash.as_ref()),
        ],
    )
}

/// Trades (interface 2.9) to a `trades` batch.
pub fn trades_to_batch<S: AsRef<str>>(trades: &[Trade<S>]) -> Result<RecordBatch> {
    let t = trades;
    batch(
        Dataset::Trades,
        vec![
            i64_req(t, |r| r.id),
            str_req(t, |r| r.protocol.as_ref()),
            str_req(t, |r| r.swap_type.as_str()),
            str_req(t, |r| r.wallet_address.as_ref()),
            str_req(t, |r| r.token_address.as_ref()),
            str_req(t, |r| r.quote_address.as_ref()),
            str_req(t, |r| r.position_address.as_ref()),
            str_req(t, |r| r.direction.as_str()),
            str_req(t, |r| r.position_state.as_str()),
            f64_req(t, |r| r.token_amount),
            f64_req(t, |r| r.quote_amount),
            f64_req(t, |r| r.native_amount),
            f64_req(t, |r| r.usd_amount),
            f64_req(t, |r| r.pre_token_balance),
            f64_req(t, |r| r.post_token_balance),
            f64_req(t, |r| r.token_price),
            f64_req(t, |r| r.quote_price),
            f64_req(t, |r| r.token_mcap),
            i64_req(t, |r| r.block_slot),
            ts_req(t, |r| r.block_time),
            str_req(t, |r| r.tx_hash.as_ref()),
        ],
    )
}

/// Candles of one token and/or pool at one interval (seconds) to a `candles` batch.
pub fn candles_to_batch(
    token: Option<&str>,
    pool: Option<&str>,
    interval: i64,
    candles: &[Candle],
) -> Result<RecordBatch> {
    let c = candles;
    let n = c.len();
    batch(
        Dataset::Candles,
        vec![
            strs(std::iter::repeat_n(token, n)),
            strs(std::iter::repeat_n(pool, n)),
            i64s(std::iter::repeat_n(Some(interval), n)),
            ts_req(c, |r| r.timestamp),
            f64_req(c, |r| r.open),
            f64_req(c, |r| r.high),
            f64_req(c, |r| r.low),
            f64_req(c, |r| r.close),
            f64_req(c, |r| r.volume),
            i64_req(c, |r| r.count),
        ],
    )
}

/// EVM price history of one chain at one interval (seconds) to a `price_history` batch, one
/// row per point.
pub fn price_history_to_batch(
    chain_id: i64,
    interval: i64,
    series: &[PriceHistorySeries],
) -> Result<RecordBatch> {
    let points: Vec<(&PriceHistorySeries, &crate::api::models::PricePoint)> = series
        .iter()
        .flat_map(|s| s.prices.iter().map(move |p| (s, p)))
        .collect();
    let n = points.len();
    batch(
        Dataset::PriceHistory,
        vec![
            i64s(std::iter::repeat_n(Some(chain_id), n)),
            strs(points.iter().map(|(s, _)| Some(s.token_address.as_str()))),
            strs(points.iter().map(|(s, _)| Some(s.pool_address.as_str()))),
            i64s(std::iter::repeat_n(Some(interval), n)),
            ts(points.iter().map(|(_, p)| Some(p.timestamp))),
            f64s(points.iter().map(|(_, p)| Some(p.usd_price))),
            f64s(points.iter().map(|(_, p)| Some(p.usd_volume))),
        ],
    )
}

/// A latest-price or price-stats record of either family: the columns they share, with the
/// block position of the family that has it.
trait PriceRow {
    fn token_address(&self) -> &str;
    fn pool_address(&self) -> &str;
    fn usd_price(&self) -> f64;
    /// `(block_number, block_slot)`: the EVM records have the first, the altchain ones the
    /// second.
    fn block(&self) -> (Option<i64>, Option<i64>);
    fn block_time(&self) -> DateTime<Utc>;
}

macro_rules! price_row {
    ($t:ty, evm) => {
        price_row!($t, |r: &$t| (Some(r.block_number), None));
    };
    ($t:ty, alt) => {
        price_row!($t, |r: &$t| (None, Some(r.block_slot)));
    };
    ($t:ty, $block:expr) => {
        impl PriceRow for $t {
            fn token_address(&self) -> &str {
                &self.token_address
            }
            fn pool_address(&self) -> &str {
                &self.pool_address
            }
            fn usd_price(&self) -> f64 {
                self.usd_price
            }
            fn block(&self) -> (Option<i64>, Option<i64>) {
                ($block)(self)
            }
            fn block_time(&self) -> DateTime<Utc> {
                self.block_time
            }
        }
    };
}

price_row!(EvmPrice, evm);
price_row!(AltPrice, alt);
price_row!(EvmPriceStats, evm);
price_row!(AltPriceStats, alt);

/// The leading columns of a price record (chain, token, pool, price) and its trailing ones
/// (block number, block slot, block time, fetch time), around whatever a dataset puts between.
fn price_columns<T: PriceRow>(
    rows: &[T],
    chain_ids: impl IntoIterator<Item = Option<i64>>,
    fetched_at: DateTime<Utc>,
) -> ([ArrayRef; 4], [ArrayRef; 4]) {
    let n = rows.len();
    (
        [
            i64s(chain_ids),
            str_req(rows, T::token_address),
            str_req(rows, T::pool_address),
            f64_req(rows, T::usd_price),
        ],
        [
            i64s(rows.iter().map(|r| r.block().0)),
            i64s(rows.iter().map(|r| r.block().1)),
            ts_req(rows, T::block_time),
            ts(std::iter::repeat_n(Some(fetched_at), n)),
        ],
    )
}

fn prices_batch<T: PriceRow>(
    rows: &[T],
    chain_ids: impl IntoIterator<Item = Option<i64>>,
    fetched_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    let (lead, tail) = price_columns(rows, chain_ids, fetched_at);
    batch(Dataset::Prices, lead.into_iter().chain(tail).collect())
}

/// EVM latest prices fetched at `fetched_at` to a `prices` batch.
pub fn evm_prices_to_batch(prices: &[EvmPrice], fetched_at: DateTime<Utc>) -> Result<RecordBatch> {
    prices_batch(prices, prices.iter().map(|r| Some(r.chain_id)), fetched_at)
}

/// Altchain latest prices fetched at `fetched_at` to a `prices` batch.
pub fn alt_prices_to_batch(prices: &[AltPrice], fetched_at: DateTime<Utc>) -> Result<RecordBatch> {
    prices_batch(prices, std::iter::repeat_n(None, prices.len()), fetched_at)
}

/// The 21 price-change columns of a set of stats records.
fn change_columns(changes: &[&PriceChanges]) -> Vec<ArrayRef> {
    let by: Vec<Vec<(f64, f64, f64)>> = changes.iter().map(|c| c.by_period()).collect();
    (0..PriceChanges::PERIODS.len())
        .flat_map(|i| {
            let col = |pick: fn(&(f64, f64, f64)) -> f64| -> ArrayRef {
                Arc::new(by.iter().map(|r| pick(&r[i])).collect::<Float64Array>())
            };
            [col(|t| t.0), col(|t| t.1), col(|t| t.2)]
        })
        .collect()
}

fn price_stats_batch<T: PriceRow>(
    rows: &[T],
    changes: impl Fn(&T) -> &PriceChanges,
    chain_id: Option<i64>,
    fetched_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    let (lead, tail) = price_columns(rows, std::iter::repeat_n(chain_id, rows.len()), fetched_at);
    let changes: Vec<&PriceChanges> = rows.iter().map(changes).collect();
    let cols = lead
        .into_iter()
        .chain(change_columns(&changes))
        .chain(tail)
        .collect();
    batch(Dataset::PriceStats, cols)
}

/// EVM price stats of one chain fetched at `fetched_at` to a `price_stats` batch.
pub fn evm_price_stats_to_batch(
    chain_id: i64,
    stats: &[EvmPriceStats],
    fetched_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    price_stats_batch(stats, |r| &r.changes, Some(chain_id), fetched_at)
}

/// Altchain price stats fetched at `fetched_at` to a `price_stats` batch.
pub fn alt_price_stats_to_batch(
    stats: &[AltPriceStats],
    fetched_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    price_stats_batch(stats, |r| &r.changes, None, fetched_at)
}

fn metadata_array(meta: &[Option<&TokenMetadata>]) -> Result<ArrayRef> {
    let m = |f: fn(&TokenMetadata) -> Option<&str>| -> ArrayRef {
        strs(meta.iter().map(|x| x.and_then(f)))
    };
    let children = vec![
        ts(meta.iter().map(|x| x.and_then(|x| x.last_trade_at))),
        ts(meta.iter().map(|x| x.and_then(|x| x.created_at))),
        m(|x| x.symbol.as_deref()),
        m(|x| x.name.as_deref()),
        m(|x| x.image.as_deref()),
        Arc::new(
            meta.iter()
                .map(|x| x.and_then(|x| x.verified))
                .collect::<BooleanArray>(),
        ),
        m(|x| x.creator_address.as_deref()),
        m(|x| x.twitter.as_deref()),
        m(|x| x.discord.as_deref()),
        m(|x| x.website.as_deref()),
        m(|x| x.telegram.as_deref()),
    ];
    let valid = meta.iter().map(Option::is_some).collect();
    struct_array(metadata_fields(), children, Some(valid), "metadata")
}

fn market_array(market: &[Option<&Market>]) -> Result<ArrayRef> {
    let f =
        |g: fn(&Market) -> Option<f64>| -> ArrayRef { f64s(market.iter().map(|x| x.and_then(g))) };
    let children = vec![
        f(|m| m.fdv),
        f(|m| m.market_cap),
        f(|m| m.price),
        f(|m| m.liquidity),
        i64s(market.iter().map(|x| x.and_then(|m| m.holders))),
        f(|m| m.total_supply),
        f(|m| m.circulating_supply),
        f(|m| m.top_holdings),
        f(|m| m.dev_holdings),
    ];
    let valid = market.iter().map(Option::is_some).collect();
    struct_array(schema::market_fields(), children, Some(valid), "market")
}

/// One window's struct column over every profile (`None` where the window is absent).
fn window_array(windows: &[Option<&WindowMetrics>]) -> Result<ArrayRef> {
    let ints: Vec<Vec<Option<i64>>> = windows
        .iter()
        .map(|w| w.map(WindowMetrics::integers).unwrap_or_default())
        .collect();
    let nums: Vec<Vec<Option<f64>>> = windows
        .iter()
        .map(|w| w.map(WindowMetrics::numbers).unwrap_or_default())
        .collect();
    let mut children: Vec<ArrayRef> = (0..WindowMetrics::INTEGER_FIELDS.len())
        .map(|i| i64s(ints.iter().map(|r| r.get(i).copied().flatten())))
        .collect();
    let dists: Vec<Option<&std::collections::BTreeMap<String, i64>>> = windows
        .iter()
        .map(|w| w.and_then(|w| w.wallet_roi_distribution.as_ref()))
        .collect();
    let buckets: Vec<ArrayRef> = ROI_BUCKETS
        .iter()
        .map(|b| i64s(dists.iter().map(|d| d.and_then(|d| d.get(*b).copied()))))
        .collect();
    children.push(struct_array(
        roi_distribution_fields(),
        buckets,
        Some(dists.iter().map(Option::is_some).collect()),
        "wallet_roi_distribution",
    )?);
    children.extend(
        (0..WindowMetrics::NUMBER_FIELDS.len())
            .map(|i| f64s(nums.iter().map(|r| r.get(i).copied().flatten()))),
    );
    let valid = windows.iter().map(Option::is_some).collect();
    struct_array(
        window_metrics_fields(),
        children,
        Some(valid),
        "metrics window",
    )
}

fn metrics_array(metrics: &[&MetricsByWindow]) -> Result<ArrayRef> {
    let children = metric_windows()
        .into_iter()
        .map(|w| {
            let key = TimeWindow::from_wire(w);
            let col: Vec<Option<&WindowMetrics>> = metrics.iter().map(|m| m.get(&key)).collect();
            window_array(&col)
        })
        .collect::<Result<Vec<_>>>()?;
    struct_array(schema::metrics_fields(), children, None, "metrics")
}

fn matched_labels_array(
    labels: &[Option<&std::collections::BTreeMap<String, Vec<String>>>],
) -> Result<ArrayRef> {
    let lengths: Vec<Option<usize>> = labels.iter().map(|m| m.map(|m| m.len())).collect();
    let entries: Vec<(&String, &Vec<String>)> =
        labels.iter().flatten().flat_map(|m| m.iter()).collect();
    let rules: Vec<Option<&[String]>> = entries.iter().map(|(_, r)| Some(r.as_slice())).collect();
    let values = struct_array(
        matched_label_fields(),
        vec![
            strs(entries.iter().map(|(l, _)| Some(l.as_str()))),
            string_lists(&rules, "matched_labels.rules")?,
        ],
        None,
        "matched_labels",
    )?;
    list_array(
        DataType::Struct(matched_label_fields()),
        &lengths,
        values,
        "matched_labels",
    )
}

/// Columns shared by both profile families, in schema order.
struct ProfileRows<'a> {
    chain_id: Vec<Option<i64>>,
    updated_at: Vec<DateTime<Utc>>,
    synced_at: Vec<DateTime<Utc>>,
    token_address: Vec<&'a str>,
    labels: Vec<Option<&'a [String]>>,
    matched_labels: Vec<Option<&'a std::collections::BTreeMap<String, Vec<String>>>>,
    dynamic_labels: Vec<Option<&'a [String]>>,
    metadata: Vec<Option<&'a TokenMetadata>>,
    market: Vec<Option<&'a Market>>,
    metrics: Vec<&'a MetricsByWindow>,
}

impl ProfileRows<'_> {
    fn into_batch(self, fetched_at: DateTime<Utc>) -> Result<RecordBatch> {
        let n = self.token_address.len();
        batch(
            Dataset::TokenProfiles,
            vec![
                i64s(self.chain_id),
                ts(self.updated_at.into_iter().map(Some)),
                ts(self.synced_at.into_iter().map(Some)),
                strs(self.token_address.into_iter().map(Some)),
                string_lists(&self.labels, "labels")?,
                matched_labels_array(&self.matched_labels)?,
                string_lists(&self.dynamic_labels, "dynamic_labels")?,
                metadata_array(&self.metadata)?,
                market_array(&self.market)?,
                metrics_array(&self.metrics)?,
                ts(std::iter::repeat_n(Some(fetched_at), n)),
            ],
        )
    }
}

/// EVM token profiles fetched at `fetched_at` to a `token_profiles` batch (no labels, no
/// market).
pub fn evm_profiles_to_batch(
    profiles: &[EvmTokenProfile],
    fetched_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    let p = profiles;
    ProfileRows {
        chain_id: p.iter().map(|r| Some(r.chain_id)).collect(),
        updated_at: p.iter().map(|r| r.updated_at).collect(),
        synced_at: p.iter().map(|r| r.synced_at).collect(),
        token_address: p.iter().map(|r| r.token_address.as_str()).collect(),
        labels: vec![None; p.len()],
        matched_labels: vec![None; p.len()],
        dynamic_labels: vec![None; p.len()],
        metadata: p.iter().map(|r| r.metadata.as_ref()).collect(),
        market: vec![None; p.len()],
        metrics: p.iter().map(|r| &r.metrics).collect(),
    }
    .into_batch(fetched_at)
}

/// Altchain token profiles fetched at `fetched_at` to a `token_profiles` batch.
pub fn alt_profiles_to_batch(
    profiles: &[AltTokenProfile],
    fetched_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    let p = profiles;
    ProfileRows {
        chain_id: vec![None; p.len()],
        updated_at: p.iter().map(|r| r.updated_at).collect(),
        synced_at: p.iter().map(|r| r.synced_at).collect(),
        token_address: p.iter().map(|r| r.token_address.as_str()).collect(),
        labels: p.iter().map(|r| r.labels.as_deref()).collect(),
        matched_labels: p.iter().map(|r| r.matched_labels.as_ref()).collect(),
        dynamic_labels: p
            .iter()
            .map(|r| Some(r.dynamic_labels.as_slice()))
            .collect(),
        metadata: p.iter().map(|r| r.metadata.as_ref()).collect(),
        market: p.iter().map(|r| r.market.as_ref()).collect(),
        metrics: p.iter().map(|r| &r.metrics).collect(),
    }
    .into_batch(fetched_at)
}

/// Wallet portfolios fetched at `fetched_at` to a `portfolios` batch, one row per wallet with
/// its holdings as a list of structs.
pub fn portfolios_to_batch(
    portfolios: &[(String, Portfolio)],
    fetched_at: DateTime<Utc>,
) -> Result<RecordBatch> {
    let p = portfolios;
    let n = p.len();
    let holdings: Vec<&crate::api::models::PortfolioToken> =
        p.iter().flat_map(|(_, pf)| pf.tokens.iter()).collect();
    let tokens = struct_array(
        portfolio_token_fields(),
        vec![
            strs(holdings.iter().map(|t| Some(t.token.as_str()))),
            f64s(holdings.iter().map(|t| Some(t.balance))),
            f64s(holdings.iter().map(|t| Some(t.price))),
            f64s(holdings.iter().map(|t| Some(t.value))),
        ],
        None,
        "portfolio tokens",
    )?;
    let lengths: Vec<Option<usize>> = p.iter().map(|(_, pf)| Some(pf.tokens.len())).collect();
    batch(
        Dataset::Portfolios,
        vec![
            strs(p.iter().map(|(w, _)| Some(w.as_str()))),
            f64s(p.iter().map(|(_, pf)| Some(pf.value))),
            list_array(
                DataType::Struct(portfolio_token_fields()),
                &lengths,
                tokens,
                "portfolio tokens",
            )?,
            ts(std::iter::repeat_n(Some(fetched_at), n)),
        ],
    )
}

/// Records that become rows of one dataset.
///
/// Each model knows its dataset and its conversion, so a producer (sync, a test, a bench)
/// writes `T::to_batch(&records, &context)` without choosing a converter, and a new dataset
/// touches this file only.
pub trait ToBatch: Sized {
    /// What the rows need beside the records: the fetch time of a snapshot, the chain and
    /// interval of a series, the target of candles; `()` for swaps and trades.
    type Context;
    /// The dataset the rows belong to.
    const DATASET: Dataset;
    /// The records as a batch with [`Self::DATASET`]'s record schema.
    fn to_batch(records: &[Self], context: &Self::Context) -> Result<RecordBatch>;
}

/// A series of candles: the token and/or pool they price, and their interval. What a candle
/// row needs beside the candle, and how the data check names a series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct CandleSeries {
    /// Token address, when the candles were asked for a token.
    pub token: Option<String>,
    /// Pool address, when the candles were asked for a pool.
    pub pool: Option<String>,
    /// Seconds per candle.
    pub interval: i64,
}

/// What a price-history row needs beside the series: its EVM chain and interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistorySeries {
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Seconds between points.
    pub interval: i64,
}

/// What an EVM price-stats row needs beside the record: its chain (the record lacks it) and
/// the snapshot's fetch time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvmSnapshot {
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Fetch time of the snapshot.
    pub fetched_at: DateTime<Utc>,
}

macro_rules! to_batch {
    ($t:ty, $ctx:ty, $dataset:expr, |$r:ident, $c:ident| $body:expr) => {
        impl ToBatch for $t {
            type Context = $ctx;
            const DATASET: Dataset = $dataset;
            fn to_batch($r: &[Self], $c: &$ctx) -> Result<RecordBatch> {
                $body
            }
        }
    };
}

impl<S: AsRef<str>> ToBatch for Swap<S> {
    type Context = ();
    const DATASET: Dataset = Dataset::Swaps;
    fn to_batch(records: &[Self], _: &()) -> Result<RecordBatch> {
        swaps_to_batch(records)
    }
}

impl<S: AsRef<str>> ToBatch for Trade<S> {
    type Context = ();
    const DATASET: Dataset = Dataset::Trades;
    fn to_batch(records: &[Self], _: &()) -> Result<RecordBatch> {
        trades_to_batch(records)
    }
}
to_batch!(Candle, CandleSeries, Dataset::Candles, |r, c| {
    candles_to_batch(c.token.as_deref(), c.pool.as_deref(), c.interval, r)
});
to_batch!(
    PriceHistorySeries,
    HistorySeries,
    Dataset::PriceHistory,
    |r, c| price_history_to_batch(c.chain_id, c.interval, r)
);
to_batch!(EvmPrice, DateTime<Utc>, Dataset::Prices, |r, c| {
    evm_prices_to_batch(r, *c)
});
to_batch!(AltPrice, DateTime<Utc>, Dataset::Prices, |r, c| {
    alt_prices_to_batch(r, *c)
});
to_batch!(EvmPriceStats, EvmSnapshot, Dataset::PriceStats, |r, c| {
    evm_price_stats_to_batch(c.chain_id, r, c.fetched_at)
});
to_batch!(AltPriceStats, DateTime<Utc>, Dataset::PriceStats, |r, c| {
    alt_price_stats_to_batch(r, *c)
});
to_batch!(
    EvmTokenProfile,
    DateTime<Utc>,
    Dataset::TokenProfiles,
    |r, c| evm_profiles_to_batch(r, *c)
);
to_batch!(
    AltTokenProfile,
    DateTime<Utc>,
    Dataset::TokenProfiles,
    |r, c| alt_profiles_to_batch(r, *c)
);
to_batch!(
    (String, Portfolio),
    DateTime<Utc>,
    Dataset::Portfolios,
    |r, c| portfolios_to_batch(r, *c)
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lake::sample::Samples;
    use arrow_array::types::Int64Type;
    use arrow_array::{Array, cast::AsArray};

    #[test]
    fn every_batch_has_its_record_schema_and_one_row_per_record() {
        let samples = Samples::generate(1, 40);
        let mut rows: std::collections::BTreeMap<Dataset, u64> = Default::default();
        for (dataset, batch) in samples.batches().expect("batches") {
            assert_eq!(batch.schema(), record_schema(dataset), "{dataset}");
            *rows.entry(dataset).or_default() += batch.num_rows() as u64;
        }
        assert_eq!(rows, samples.row_counts());
    }

    #[test]
    fn absent_sections_are_null_and_unknown_windows_are_left_out() {
        let samples = Samples::generate(2, 10);
        let mut p = samples.alt_profiles[0].clone();
        p.market = None;
        p.metadata = None;
        p.metrics.insert(
            TimeWindow::Other("30d".into()),
            samples.alt_profiles[0].metrics[&TimeWindow::D7].clone(),
        );
        p.metrics.remove(&TimeWindow::M1);
        let b = alt_profiles_to_batch(&[p], samples.fetched_at).expect("batch");
        assert!(b.column_by_name("market").expect("market").is_null(0));
        assert!(b.column_by_name("metadata").expect("metadata").is_null(0));
        let metrics = b.column_by_name("metrics").expect("metrics").as_struct();
        assert_eq!(metrics.num_columns(), 6, "only the documented windows");
        assert!(metrics.column_by_name("1m").expect("1m").is_null(0));
        let week = metrics.column_by_name("7d").expect("7d").as_struct();
        let trades = week
            .column_by_name("trade_count")
            .expect("trade_count")
            .as_primitive::<Int64Type>();
        assert_eq!(
            Some(trades.value(0)),
            samples.alt_profiles[0].metrics[&TimeWindow::D7].trade_count
        );
    }

    #[test]
    fn empty_pages_give_empty_batches() {
        let t = Utc::now();
        assert_eq!(swaps_to_batch::<String>(&[]).expect("swaps").num_rows(), 0);
        assert_eq!(
            portfolios_to_batch(&[], t).expect("portfolios").num_rows(),
            0
        );
        assert_eq!(
            alt_profiles_to_batch(&[], t).expect("profiles").num_rows(),
            0
        );
        assert_eq!(
            price_history_to_batch(1, 60, &[])
                .expect("history")
                .num_rows(),
            0
        );
    }
}
