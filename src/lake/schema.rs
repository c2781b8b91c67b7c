//! One Arrow schema per dataset, the columns' documentation, and the schema version.
//!
//! Three views of a dataset exist:
//! - the *record* schema ([`record_schema`]): what the conversion functions produce and what
//!   [`Transaction::write`](super::Transaction::write) accepts;
//! - the *file* schema ([`file_schema`]): the record schema without the columns that live only
//!   in the hive path (`interval` of candles and price history), which is what each Parquet
//!   file stores;
//! - the *scan* view: the file columns plus the hive columns `chain`, `[interval]` and `date`,
//!   which is what [`Lake::scan`](super::Lake::scan), DuckDB and polars see.
//!
//! Column names are the service's field names, and nested objects are Arrow structs, so a dotted
//! path such as `market.liquidity` or `metrics.1d.volume` names the same value everywhere.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use super::dataset::Dataset;
use crate::api::models::{PriceChanges, ROI_BUCKETS, TimeWindow, WindowMetrics};

/// Version of the on-disk schemas, stored in every file's key-value metadata under
/// [`SCHEMA_VERSION_KEY`]. Bump it whenever a column is added, removed or retyped.
pub const SCHEMA_VERSION: u32 = 1;

/// Key-value metadata key holding [`SCHEMA_VERSION`] in every Parquet file.
pub const SCHEMA_VERSION_KEY: &str = "dexlake.schema_version";

/// Key-value metadata key holding the dataset name in every Parquet file.
pub const DATASET_KEY: &str = "dexlake.dataset";

/// The Arrow type of every timestamp column: microseconds, UTC.
pub(crate) fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// A timestamp column (of [`timestamp_type`]) named `name`.
fn timestamp_field(name: &str, nullable: bool) -> Field {
    Field::new(name, timestamp_type(), nullable)
}

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn i64f(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Int64, nullable)
}

fn f64f(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Float64, nullable)
}

/// The list type with Arrow's conventional nullable `item` element.
fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

/// Fields of the token metadata struct (interface 2.3).
pub(crate) fn metadata_fields() -> Fields {
    Fields::from(vec![
        timestamp_field("last_trade_at", true),
        timestamp_field("created_at", true),
        utf8("symbol", true),
        utf8("name", true),
        utf8("image", true),
        Field::new("verified", DataType::Boolean, true),
        utf8("creator_address", true),
        utf8("twitter", true),
        utf8("discord", true),
        utf8("website", true),
        utf8("telegram", true),
    ])
}

/// Fields of the altchain market struct (interface 2.6); `holders` is an integer.
pub(crate) fn market_fields() -> Fields {
    Fields::from(vec![
        f64f("fdv", true),
        f64f("market_cap", true),
        f64f("price", true),
        f64f("liquidity", true),
        i64f("holders", true),
        f64f("total_supply", true),
        f64f("circulating_supply", true),
        f64f("top_holdings", true),
        f64f("dev_holdings", true),
    ])
}

/// Fields of `wallet_roi_distribution`: one integer per documented ROI bucket.
pub(crate) fn roi_distribution_fields() -> Fields {
    ROI_BUCKETS.iter().map(|b| i64f(b, true)).collect()
}

/// Fields of one metrics window: the integers, `wallet_roi_distribution`, then the numbers, in
/// the service's order.
pub(crate) fn window_metrics_fields() -> Fields {
    let mut fields: Vec<Field> = WindowMetrics::INTEGER_FIELDS
        .iter()
        .map(|n| i64f(n, true))
        .collect();
    fields.push(Field::new(
        "wallet_roi_distribution",
        DataType::Struct(roi_distribution_fields()),
        true,
    ));
    fields.extend(WindowMetrics::NUMBER_FIELDS.iter().map(|n| f64f(n, true)));
    Fields::from(fields)
}

/// The documented metrics windows, in the service's order (`7d` … `1m`).
pub(crate) fn metric_windows() -> Vec<&'static str> {
    TimeWindow::KNOWN.iter().map(|w| w.as_str()).collect()
}

/// Fields of the `metrics` struct: one struct per documented window.
pub(crate) fn metrics_fields() -> Fields {
    metric_windows()
        .into_iter()
        .map(|w| Field::new(w, DataType::Struct(window_metrics_fields()), true))
        .collect()
}

/// Fields of one `matched_labels` entry: the label and the rules that made it apply.
pub(crate) fn matched_label_fields() -> Fields {
    Fields::from(vec![
        utf8("label", true),
        Field::new("rules", list_of(DataType::Utf8), true),
    ])
}

/// Fields of one portfolio holding.
pub(crate) fn portfolio_token_fields() -> Fields {
    Fields::from(vec![
        utf8("token", true),
        f64f("balance", true),
        f64f("price", true),
        f64f("value", true),
    ])
}

/// The 21 price-change columns of price stats, in the service's order.
pub(crate) fn price_change_fields() -> Vec<Field> {
    PriceChanges::PERIODS
        .iter()
        .flat_map(|p| {
            [
                f64f(&format!("usd_price_change_{p}"), false),
                f64f(&format!("usd_volume_{p}"), false),
                f64f(&format!("usd_volume_change_{p}"), false),
            ]
        })
        .collect()
}

/// The schema of the batches a dataset's conversion produces and `Transaction::write` accepts.
pub fn record_schema(dataset: Dataset) -> SchemaRef {
    let fields: Vec<Field> = match dataset {
        Dataset::Swaps => vec![
            i64f("id", false),
            utf8("swap_type", false),
            utf8("protocol", false),
            utf8("wallet_address", false),
            utf8("pool_address", false),
            utf8("token_address_in", false),
            utf8("token_address_out", false),
            f64f("token_amount_in", false),
            f64f("token_amount_out", false),
            f64f("token_price_in", false),
            f64f("token_price_out", false),
            f64f("pre_token_balance_in", false),
            f64f("pre_token_balance_out", false),
            f64f("post_token_balance_in", false),
            f64f("post_token_balance_out", false),
            f64f("usd_amount_in", false),
            f64f("usd_amount_out", false),
            i64f("block_slot", false),
            timestamp_field("block_time", false),
            utf8("tx_hash", false),
        ],
        Dataset::Trades => vec![
            i64f("id", false),
            utf8("protocol", false),
            utf8("swap_type", false),
            utf8("wallet_address", false),
            utf8("token_address", false),
            utf8("quote_address", false),
            utf8("position_address", false),
            utf8("direction", false),
            utf8("position_state", false),
            f64f("token_amount", false),
            f64f("quote_amount", false),
            f64f("native_amount", false),
            f64f("usd_amount", false),
            f64f("pre_token_balance", false),
            f64f("post_token_balance", false),
            f64f("token_price", false),
            f64f("quote_price", false),
            f64f("token_mcap", false),
            i64f("block_slot", false),
            timestamp_field("block_time", false),
            utf8("tx_hash", false),
        ],
        Dataset::Candles => vec![
            utf8("token", true),
            utf8("pool", true),
            i64f("interval", false),
            timestamp_field("timestamp", false),
            f64f("open", false),
            f64f("high", false),
            f64f("low", false),
            f64f("close", false),
            f64f("volume", false),
            i64f("count", false),
        ],
        Dataset::PriceHistory => vec![
            i64f("chain_id", false),
            utf8("token_address", false),
            utf8("pool_address", false),
            i64f("interval", false),
            timestamp_field("timestamp", false),
            f64f("usd_price", false),
            f64f("usd_volume", false),
        ],
        Dataset::Prices => vec![
            i64f("chain_id", true),
            utf8("token_address", false),
            utf8("pool_address", false),
            f64f("usd_price", false),
            i64f("block_number", true),
            i64f("block_slot", true),
            timestamp_field("block_time", false),
            timestamp_field("fetched_at", false),
        ],
        Dataset::PriceStats => {
            let mut f = vec![
                i64f("chain_id", true),
                utf8("token_address", false),
                utf8("pool_address", false),
                f64f("usd_price", false),
            ];
            f.extend(price_change_fields());
            f.extend([
                i64f("block_number", true),
                i64f("block_slot", true),
                timestamp_field("block_time", false),
                timestamp_field("fetched_at", false),
            ]);
            f
        }
        Dataset::TokenProfiles => vec![
            i64f("chain_id", true),
            timestamp_field("updated_at", false),
            timestamp_field("synced_at", false),
            utf8("token_address", false),
            Field::new("labels", list_of(DataType::Utf8), true),
            Field::new(
                "matched_labels",
                list_of(DataType::Struct(matched_label_fields())),
                true,
            ),
            Field::new("dynamic_labels", list_of(DataType::Utf8), true),
            Field::new("metadata", DataType::Struct(metadata_fields()), true),
            Field::new("market", DataType::Struct(market_fields()), true),
            Field::new("metrics", DataType::Struct(metrics_fields()), true),
            timestamp_field("fetched_at", false),
        ],
        Dataset::Portfolios => vec![
            utf8("wallet", false),
            f64f("value", false),
            Field::new(
                "tokens",
                list_of(DataType::Struct(portfolio_token_fields())),
                true,
            ),
            timestamp_field("fetched_at", false),
        ],
        // The bar columns of `analytics::ohlcv::BAR_COLUMNS` but `incomplete` (a stored bar
        // is closed); prices are null in bars filled with nulls, `vwap` without volume.
        Dataset::Bars => vec![
            utf8("token_address", false),
            i64f("interval", false),
            timestamp_field("timestamp", false),
            f64f("open", true),
            f64f("high", true),
            f64f("low", true),
            f64f("close", true),
            f64f("volume", false),
            f64f("base_volume", false),
            f64f("buy_volume", false),
            f64f("sell_volume", false),
            f64f("sum_pq", false),
            f64f("sum_q", false),
            i64f("count", false),
            f64f("vwap", true),
        ],
    };
    Arc::new(Schema::new(fields))
}

/// The schema stored in each Parquet file of a dataset: the record schema without the columns
/// kept only in the hive path, with the dataset name and [`SCHEMA_VERSION`] as metadata.
pub fn file_schema(dataset: Dataset) -> SchemaRef {
    let record = record_schema(dataset);
    let path_only = dataset.path_columns();
    let fields: Vec<Field> = record
        .fields()
        .iter()
        .filter(|f| !path_only.contains(&f.name().as_str()))
        .map(|f| f.as_ref().clone())
        .collect();
    let metadata: std::collections::HashMap<String, String> = [
        (SCHEMA_VERSION_KEY.to_owned(), SCHEMA_VERSION.to_string()),
        (DATASET_KEY.to_owned(), dataset.name().to_owned()),
    ]
    .into_iter()
    .collect();
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// Names of the hive columns of a dataset's path, in path order (`chain`, optional key, `date`).
pub(crate) fn hive_columns(dataset: Dataset) -> Vec<&'static str> {
    let mut cols = vec!["chain"];
    cols.extend(dataset.path_columns());
    cols.push("date");
    cols
}
