//! Documentation of every column (type, unit, meaning), generated from the schemas so that
//! `docs/datasets.md` and `dexlake schema` cannot drift from the code.

use arrow_schema::{DataType, Field};

use super::dataset::Dataset;
use super::schema::{self, SCHEMA_VERSION, record_schema};
use crate::api::models::WindowMetrics;

/// One documented column (a leaf of the schema, or a list of scalars).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDoc {
    /// Dotted path; `metrics.<window>.` stands for each window, `[]` for list elements.
    pub path: String,
    /// Type as readers show it (`int64`, `float64`, `string`, `bool`,
    /// `timestamp[us, UTC]`, `list<string>`).
    pub type_name: String,
    /// Unit, or `-` for none.
    pub unit: &'static str,
    /// What the value means.
    pub meaning: String,
}

fn type_name(dt: &DataType) -> String {
    match dt {
        DataType::Int64 => "int64".into(),
        DataType::Float64 => "float64".into(),
        DataType::Utf8 => "string".into(),
        DataType::Boolean => "bool".into(),
        DataType::Timestamp(_, _) => "timestamp[us, UTC]".into(),
        DataType::List(f) => format!("list<{}>", type_name(f.data_type())),
        DataType::Struct(_) => "struct".into(),
        other => other.to_string(),
    }
}

/// Unit and meaning of a metrics window field, from the service's naming (service-facts.md,
/// "Units").
fn metric_doc(name: &str) -> (&'static str, String) {
    let percent = name.ends_with("_roi") || name.contains("winrate") || name == "max_drawdown";
    let unit = if name == "avg_holding_duration" {
        "seconds"
    } else if percent {
        "percent"
    } else if WindowMetrics::INTEGER_FIELDS.contains(&name) {
        "count"
    } else if name.ends_with("_mcap")
        || name.contains("pnl")
            && !name.contains("ratio")
            && !name.contains("stability")
            && !name.contains("volatility")
        || name.contains("volume") && !name.contains("ratio")
        || name.ends_with("_size")
        || name.contains("price") && !name.contains("stability") && !name.contains("volatility")
        || name.starts_with("largest_trade")
    {
        "USD"
    } else {
        "ratio"
    };
    (
        unit,
        format!("`{name}` of the token's trading in the window"),
    )
}

fn roi_bucket_doc(bucket: &str) -> String {
    let range = match bucket {
        "gt_500" => "above 500",
        "200_500" => "200 to 500",
        "0_200" => "0 to 200",
        "neg50_0" => "-50 to 0",
        "lt_neg50_0" => "below -50",
        other => other,
    };
    format!("wallets whose ROI (percent) is {range}")
}

/// Unit and meaning of a column path outside `metrics`.
fn describe(dataset: Dataset, path: &str) -> Option<(&'static str, &'static str)> {
    use Dataset::*;
    let d = match (dataset, path) {
        (_, "id") => ("-", "unique id of the record at the service"),
        (_, "swap_type") => (
            "-",
            "which side is the quote token: quote_token (quote sold, token bought), token_quote, token_token, quote_quote; other values kept as sent",
        ),
        (_, "protocol") => ("-", "DEX protocol"),
        (_, "wallet_address") => ("-", "wallet that swapped or traded"),
        (Swaps, "pool_address") => ("-", "pool swapped in"),
        (_, "token_address_in") => ("-", "token paid in"),
        (_, "token_address_out") => ("-", "token received"),
        (_, "token_amount_in") => ("tokens", "amount paid in"),
        (_, "token_amount_out") => ("tokens", "amount received"),
        (_, "token_price_in") => ("USD", "price of the token paid in"),
        (_, "token_price_out") => ("USD", "price of the token received"),
        (_, "pre_token_balance_in") => ("tokens", "wallet balance of the token paid in, before"),
        (_, "pre_token_balance_out") => ("tokens", "wallet balance of the token received, before"),
        (_, "post_token_balance_in") => ("tokens", "wallet balance of the token paid in, after"),
        (_, "post_token_balance_out") => ("tokens", "wallet balance of the token received, after"),
        (_, "usd_amount_in") => ("USD", "value paid in"),
        (_, "usd_amount_out") => ("USD", "value received"),
        (Swaps | Trades, "block_slot") => ("slot", "slot of the event"),
        (_, "block_slot") => (
            "slot",
            "altchain slot of the latest swap (null for EVM records)",
        ),
        (_, "block_number") => (
            "block",
            "EVM block of the latest swap (null for altchain records)",
        ),
        (Swaps | Trades, "block_time") => {
            ("UTC time", "time of the slot; names the date= partition")
        }
        (_, "block_time") => ("UTC time", "time of the latest swap"),
        (_, "tx_hash") => ("-", "transaction hash"),
        (Trades, "token_address") => ("-", "token traded"),
        (_, "quote_address") => ("-", "quote token"),
        (_, "position_address") => (
            "-",
            "address identifying the wallet's position in the token",
        ),
        (_, "direction") => (
            "-",
            "buy or sell, from the wallet's side; other values kept as sent",
        ),
        (_, "position_state") => (
            "-",
            "open, trade, close (EVM adds unknown); other values kept as sent",
        ),
        (_, "token_amount") => ("tokens", "amount of the token"),
        (_, "quote_amount") => ("quote tokens", "amount of the quote token"),
        (_, "native_amount") => ("native coin", "value in the chain's native coin"),
        (_, "usd_amount") => ("USD", "value of the trade"),
        (_, "pre_token_balance") => ("tokens", "wallet's token balance before"),
        (_, "post_token_balance") => ("tokens", "wallet's token balance after"),
        (_, "token_price") => ("USD", "token price"),
        (_, "quote_price") => ("USD", "quote price"),
        (_, "token_mcap") => ("USD", "token market capitalisation"),
        (Candles, "token") => (
            "-",
            "token the candles were requested for (null when requested by pool only)",
        ),
        (Candles, "pool") => (
            "-",
            "pool the candles were requested for (null when requested by token only)",
        ),
        (_, "interval") => (
            "seconds",
            "sampling interval; hive path level interval=, not stored in the files",
        ),
        (Candles, "timestamp") => ("UTC time", "start of the candle; names the date= partition"),
        (Bars, "token_address") => ("-", "token the bar prices (the token side of its swaps)"),
        (Bars, "timestamp") => (
            "UTC time",
            "label of the bar (its bucket's start with the default left label); names the date= partition",
        ),
        (Bars, "open") => (
            "USD",
            "price of the bar's first event (null in a bar filled with nulls)",
        ),
        (Bars, "high") => ("USD", "highest price in the bar"),
        (Bars, "low") => ("USD", "lowest price in the bar"),
        (Bars, "close") => ("USD", "price of the bar's last event"),
        (Bars, "volume") => ("USD", "USD volume of the bar's events"),
        (Bars, "base_volume") => ("tokens", "token volume of the bar's events"),
        (Bars, "buy_volume") => ("USD", "USD volume of the buys"),
        (Bars, "sell_volume") => ("USD", "USD volume of the sells"),
        (Bars, "sum_pq") => (
            "USD",
            "sum of price times token amount (vwap = sum_pq / sum_q)",
        ),
        (Bars, "sum_q") => ("tokens", "sum of the token amounts that priced"),
        (Bars, "count") => ("count", "number of events in the bar (0 in a filled bar)"),
        (Bars, "vwap") => ("USD", "volume-weighted average price (null without volume)"),
        (_, "open") => ("USD", "first price in the candle"),
        (_, "high") => ("USD", "highest price in the candle"),
        (_, "low") => ("USD", "lowest price in the candle"),
        (_, "close") => ("USD", "last price in the candle"),
        (Candles, "volume") => ("USD", "traded volume in the candle"),
        (Candles, "count") => ("count", "number of trades in the candle"),
        (_, "chain_id") => (
            "-",
            "numeric EVM chain id (null for altchain records); the path's chain=evm-<id>",
        ),
        (_, "token_address") => ("-", "token address"),
        (_, "pool_address") => ("-", "pool address"),
        (PriceHistory, "timestamp") => (
            "UTC time",
            "start of the sampling interval; names the date= partition",
        ),
        (_, "usd_price") => ("USD", "price"),
        (_, "usd_volume") => ("USD", "volume in the sampling interval"),
        (_, "fetched_at") => (
            "UTC time",
            "when the snapshot was fetched; names the date= partition",
        ),
        (_, "updated_at") => (
            "UTC time",
            "when the profile was last updated at the service",
        ),
        (_, "synced_at") => (
            "UTC time",
            "when the profile was last synced at the service",
        ),
        (_, "labels") => (
            "-",
            "static labels (trending, hot, new, popular; altchain only)",
        ),
        (_, "matched_labels[].label") => ("-", "a label of the profile"),
        (_, "matched_labels[].rules") => ("-", "the rules that made the label apply"),
        (_, "dynamic_labels") => (
            "-",
            "names of the request's dynamic labels the profile satisfied",
        ),
        (_, "metadata.last_trade_at") => ("UTC time", "time of the token's latest trade"),
        (_, "metadata.created_at") => ("UTC time", "creation time of the token"),
        (_, "metadata.symbol") => ("-", "ticker symbol"),
        (_, "metadata.name") => ("-", "display name"),
        (_, "metadata.image") => ("-", "image URL"),
        (_, "metadata.verified") => ("-", "whether the token is verified"),
        (_, "metadata.creator_address") => ("-", "address that created the token"),
        (_, "metadata.twitter") => ("-", "Twitter handle or URL"),
        (_, "metadata.discord") => ("-", "Discord invite"),
        (_, "metadata.website") => ("-", "website URL"),
        (_, "metadata.telegram") => ("-", "Telegram link"),
        (_, "market.fdv") => ("USD", "fully diluted valuation (altchain only)"),
        (_, "market.market_cap") => ("USD", "circulating supply × price"),
        (_, "market.price") => ("USD", "latest price"),
        (_, "market.liquidity") => ("USD", "liquidity of the token's pools"),
        (_, "market.holders") => ("count", "number of holders"),
        (_, "market.total_supply") => ("tokens", "total supply"),
        (_, "market.circulating_supply") => ("tokens", "circulating supply"),
        (_, "market.top_holdings") => ("percent", "share of supply held by the top holders"),
        (_, "market.dev_holdings") => ("percent", "share of supply held by the creator"),
        (Portfolios, "wallet") => ("-", "wallet the portfolio belongs to"),
        (Portfolios, "value") => ("USD", "total value of the portfolio"),
        (_, "tokens[].token") => ("-", "token held"),
        (_, "tokens[].balance") => ("tokens", "balance held"),
        (_, "tokens[].price") => ("USD", "latest price of the token"),
        (_, "tokens[].value") => ("USD", "balance × price"),
        _ => return None,
    };
    Some(d)
}

fn price_change_doc(path: &str) -> Option<(&'static str, String)> {
    for p in crate::api::models::PriceChanges::PERIODS {
        if path == format!("usd_price_change_{p}") {
            return Some(("percent", format!("price change over the last {p}")));
        }
        if path == format!("usd_volume_{p}") {
            return Some(("USD", format!("volume over the last {p}")));
        }
        if path == format!("usd_volume_change_{p}") {
            return Some((
                "percent",
                format!("volume change over the last {p} against the {p} before"),
            ));
        }
    }
    None
}

fn leaf_doc(dataset: Dataset, path: &str) -> (&'static str, String) {
    if let Some(rest) = path.strip_prefix("metrics.<window>.") {
        if let Some(bucket) = rest.strip_prefix("wallet_roi_distribution.") {
            return ("count", roi_bucket_doc(bucket));
        }
        return metric_doc(rest);
    }
    if let Some(d) = price_change_doc(path) {
        return d;
    }
    match describe(dataset, path) {
        Some((u, m)) => (u, m.to_owned()),
        None => ("", String::new()),
    }
}

fn flatten(dataset: Dataset, field: &Field, prefix: &str, out: &mut Vec<ColumnDoc>) {
    let path = format!("{prefix}{}", field.name());
    match field.data_type() {
        DataType::Struct(children) if path == "metrics" => {
            // Every window has the same fields, so they are documented once.
            if let Some(first) = children.first()
                && let DataType::Struct(inner) = first.data_type()
            {
                for c in inner {
                    flatten(dataset, c, "metrics.<window>.", out);
                }
            }
        }
        DataType::Struct(children) => {
            for c in children {
                flatten(dataset, c, &format!("{path}."), out);
            }
        }
        DataType::List(item) if matches!(item.data_type(), DataType::Struct(_)) => {
            if let DataType::Struct(children) = item.data_type() {
                for c in children {
                    flatten(dataset, c, &format!("{path}[]."), out);
                }
            }
        }
        dt => {
            let (unit, meaning) = leaf_doc(dataset, &path);
            out.push(ColumnDoc {
                path,
                type_name: type_name(dt),
                unit,
                meaning,
            });
        }
    }
}

/// The documented columns of a dataset's record schema, in schema order.
pub fn column_docs(dataset: Dataset) -> Vec<ColumnDoc> {
    let mut out = Vec::new();
    for f in record_schema(dataset).fields() {
        flatten(dataset, f, "", &mut out);
    }
    out
}

/// One line on how a dataset is laid out and keyed.
pub fn dataset_summary(dataset: Dataset) -> String {
    let chain = match dataset {
        Dataset::PriceHistory => "chain=evm-<chain_id>",
        d if d.has_chain_id() => "chain=<altchain|evm-<chain_id>>",
        _ => "chain=altchain",
    };
    let mut levels = vec![chain.to_owned()];
    levels.extend(
        dataset
            .path_columns()
            .iter()
            .map(|c| format!("{c}=<seconds>")),
    );
    levels.push("date=YYYY-MM-DD".into());
    format!(
        "Path `{}/{}/part-<id>.parquet`; `date` is the UTC day of `{}`; files sorted by `{}`; natural key: {}; {}.",
        dataset.name(),
        levels.join("/"),
        dataset.time_column(),
        dataset.time_column(),
        match dataset.id_column() {
            Some(id) => format!("({id}) across the whole dataset"),
            None => format!("partition + ({})", dataset.key_columns().join(", ")),
        },
        if dataset.replaces_on_write() {
            "a later write of a key replaces the record (the newest bars are revised until their interval closes)"
        } else if dataset.id_column().is_some() {
            "a repeat at the same time is dropped (the first write stays); a later answer at another time replaces the record, on whatever day"
        } else {
            "a repeated key is dropped (the first write stays)"
        }
    )
}

/// The whole of `docs/datasets.md`.
pub fn markdown() -> String {
    let mut s = String::new();
    s.push_str("# Datasets of the lake\n\n");
    s.push_str(
        "This file is generated from the code (`dexlake schema --markdown`) and checked by the \
         tests; edit `src/lake/docs.rs` and `src/lake/schema.rs`, not this file.\n\n",
    );
    s.push_str(&format!(
        "Schema version {SCHEMA_VERSION} (stored in every file's key-value metadata as `{}`).\n\n",
        schema::SCHEMA_VERSION_KEY
    ));
    s.push_str(
        "Every dataset is read with hive partitioning: the columns `chain` (string: `altchain` \
         or `evm-<chain_id>`), `interval` (int64, candles and price history only) and `date` \
         (date, UTC) come from the folder names and are not stored in the files. Timestamps are \
         `timestamp[us, UTC]`. Nested objects are structs, so a dotted path such as \
         `market.liquidity` or `metrics.1d.volume` names the same value in a search filter, in \
         polars (`pl.col(\"metrics\").struct.field(\"1d\").struct.field(\"volume\")`) and in \
         DuckDB (`metrics['1d'].volume`), and in `dexlake sql` (`metrics.\"1d\".volume`: a \
         window's name is quoted). `metrics.<window>` stands for each of the windows \
         `7d`, `1d`, `6h`, `1h`, `5m`, `1m`; windows and ROI buckets the service may add later \
         are not stored. Snapshots (prices, price stats, profiles, portfolios) carry the time \
         they were fetched in `fetched_at`.\n\n",
    );
    s.push_str(&format!(
        "## Committed files\n\n\
         A glob of a dataset's folder reads every Parquet file in it: the committed data, but \
         also the files compactions and rewrites replaced, which the lake keeps for its older \
         versions until `dexlake vacuum` deletes them (a glob of a compacted lake counts their \
         rows twice), the new files of a commit a moment before it lands, and what a crash \
         left until the next writer cleans up. Engines that must read exactly the committed \
         files (DuckDB, Spark, Trino, a reader beside a writer) take the list from the commit \
         log under `_dexlake/`:\n\n\
         1. `{last}` names the newest checkpoint: `{{\"version\": V, ...}}`;\n\
         2. `{cp}/<V, 20 digits>.files.json` holds `{{\"files\": {{path: entry}}}}`, paths \
         relative to the lake root;\n\
         3. for v = V+1, V+2, ... while `{log}/<v, 20 digits>.json` exists, drop the paths in \
         its `remove` list and add the keys of its `add` object.\n\n\
         To read an older version V' (what `--as-of V'` reads), start from the newest \
         checkpoint at or before V' in `{cp}/` and stop after entry V'. A checkpoint's \
         `removed` object lists the replaced files still on disk, with the version that removed \
         each; `dexlake vacuum` deletes those no kept version lists, and the log before the \
         oldest kept version's checkpoint.\n\n\
         The entries hold each file's `dataset`, `rows`, `bytes`, `min_time`, `max_time` (and \
         `min_id`, `max_id` for swaps and trades), so a reader can prune by time without opening \
         files. The sync state (cursors, covered ranges) is in `{cp}/<V>.state.json` and the \
         entries' `state` objects.\n\n\
         On an object store (`s3://bucket/prefix`) the steps are the same GETs under the \
         prefix; instead of probing versions one by one, a reader may LIST `{log}/` starting \
         after the checkpoint's entry and apply the entries in order, stopping at the first \
         gap. There a glob is wrong for longer: the files of an interrupted commit, or of one \
         that lost its version to another writer, stay in the bucket unreferenced (no writer \
         may delete what another could be committing), so only the log says what is \
         committed.\n\n",
        last = super::layout::LAST_CHECKPOINT_PATH,
        cp = super::layout::CHECKPOINT_DIR,
        log = super::layout::LOG_DIR,
    ));
    s.push_str(
        "Other engines read exactly the committed files the same way: list them from the log as \
         above, keep the dataset's paths (the entries' `dataset`), and hand the engine those \
         paths, never the dataset's folder or a glob of it; the hive columns `chain` and `date` \
         come from the paths.\n\n\
         - **`dexlake sql`** needs no other engine: `dexlake sql \"select date, count(*) as n \
         from swaps group by date\"` (Python `lake.sql(query)`) runs one query of polars' SQL \
         over tables named by the datasets, each made of exactly the committed files (an empty \
         table with its columns when a dataset has none), with the hive columns and struct \
         fields by path. A statement that writes, several statements and a table function such \
         as `read_parquet('...')` are refused.\n\
         - **`dexlake views`** does this for DuckDB and Spark: it prints a script that defines \
         one view per dataset over the files committed now (with `--as-of`, at that version), \
         every path absolute. \
         `dexlake views > views.sql && duckdb -init views.sql` gives DuckDB the views \
         `swaps`, `trades`, … (`read_parquet([...], hive_partitioning = true, union_by_name = \
         true)`), which read what `Lake::scan` reads, where \
         `read_parquet('lake/swaps/**/*.parquet')` also reads the replaced files kept for older \
         versions and any file no commit holds; \
         `dexlake views --engine spark > views.py` is a PySpark script registering the same \
         views as temporary views (`spark-submit views.py`, or paste it into `pyspark`). A \
         dataset without files gets a comment instead of a view. On S3 the DuckDB script needs \
         the `httpfs` extension and a secret, and the Spark script reads `s3a://` paths.\n\
         - **Spark**: `spark.read.option(\"basePath\", LAKE).parquet(*paths)`, each listed path \
         prefixed with the lake root; `basePath` makes Spark take `chain` and `date` from the \
         paths. `python/spark/committed_files.py` is the listing in plain Python; \
         `dexlake.spark` (python/README.md, \"Spark\") reads the list from \
         `dexlake.Lake(root, as_of=...).files(dataset)` and computes the bars of `dexlake \
         ohlcv` and the ledgers of `dexlake pnl` with dexlake's own kernels, tested against \
         them. A lake on S3 (`s3a://...`) needs hadoop-aws on Spark's classpath.\n\
         - **Trino** (Hive connector): do not point a table's location at the dataset's folder, \
         which reads every file in it. Register the listed files instead, e.g. a table stored \
         as `SymlinkTextInputFormat` whose manifest in each partition folder lists that \
         partition's committed files (rewritten after each commit, as Delta Lake does for \
         Trino), or filter queries on the hidden `\"$path\"` column with the listed paths.\n\n",
    );
    for dataset in Dataset::ALL {
        s.push_str(&format!(
            "## {}\n\n{}\n\n",
            dataset.name(),
            dataset_summary(dataset)
        ));
        s.push_str("| column | type | unit | meaning |\n|---|---|---|---|\n");
        for c in column_docs(dataset) {
            s.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                c.path, c.type_name, c.unit, c.meaning
            ));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_is_documented() {
        for d in Dataset::ALL {
            for c in column_docs(d) {
                assert!(
                    !c.meaning.is_empty() && !c.unit.is_empty(),
                    "{d}: column {} has no documentation",
                    c.path
                );
            }
        }
    }

    #[test]
    fn metric_units_follow_the_service_facts() {
        assert_eq!(metric_doc("avg_wallet_roi").0, "percent");
        assert_eq!(metric_doc("volume_weighted_winrate").0, "percent");
        assert_eq!(metric_doc("max_drawdown").0, "percent");
        assert_eq!(metric_doc("avg_holding_duration").0, "seconds");
        assert_eq!(metric_doc("buy_volume").0, "USD");
        assert_eq!(metric_doc("pnl_volume_ratio").0, "ratio");
        assert_eq!(metric_doc("sharpe_ratio").0, "ratio");
        assert_eq!(metric_doc("trade_count").0, "count");
    }
}
