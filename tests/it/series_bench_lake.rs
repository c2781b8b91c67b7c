//! The price-history lake of the hidden `dexlake bench-lake --dataset price-history`: the
//! layout and columns a sync of the simulator's price history gives, one point per token and
//! minute, and hourly bars through `dexlake ohlcv --source price-history` equal to a polars
//! resampling of the same points.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use dexlake::lake::{Dataset, Lake};
use dexlake::sync::{Job, SyncConfig, Syncer};
use polars::prelude::*;

use crate::common::{sim_client, tiny_sim};

/// Runs `dexlake args` and returns its output, asserting success.
fn dexlake(args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .output()
        .expect("the dexlake binary runs");
    assert!(
        out.status.success(),
        "dexlake {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A bench lake of `tokens` tokens over `days` days (seed 7) in a new folder.
fn bench_lake(tokens: usize, days: i64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dexlake(&[
        "bench-lake",
        dir.path().to_str().expect("a UTF-8 path"),
        "--dataset",
        "price-history",
        "--tokens",
        &tokens.to_string(),
        "--days",
        &days.to_string(),
        "--seed",
        "7",
    ]);
    let points = tokens as i64 * days * 1440;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        points.to_string()
    );
    dir
}

/// The folders holding `dataset`'s data files, relative to the lake's root.
fn partitions(root: &Path, dataset: &str) -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).expect("a folder") {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                let parent = p.parent().expect("a parent");
                out.insert(
                    parent
                        .strip_prefix(root)
                        .expect("inside")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&root.join(dataset), root, &mut out);
    out
}

#[test]
fn the_bench_price_history_has_the_layout_and_columns_of_a_synced_one() {
    // The simulator's price history of two EVM tokens of chain 1 over the two days before its
    // present, at 60 s, synced and compacted.
    let synced = std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let sim = tiny_sim(5).await;
            let catalog = sim.market().catalog();
            let tokens: Vec<String> = catalog.evm["1"].tokens[..2]
                .iter()
                .map(|t| t.address.clone())
                .collect();
            let now = sim.market().now();
            let dir = tempfile::tempdir().expect("temp dir");
            let lake = Arc::new(Lake::open(dir.path()).expect("lake"));
            let job = Job::PriceHistory {
                chain_id: 1,
                tokens,
                pools: vec![],
                interval: 60,
                from: now - Duration::days(2),
                to: Some(now),
            };
            let syncer = Syncer::new(sim_client(&sim), Arc::clone(&lake), SyncConfig::default());
            let report = syncer.run(&[job]).await;
            assert!(!report.any_failed(), "sync failed: {report:?}");
            lake.compact().expect("compacted");
            sim.shutdown().await;
            dir
        })
    })
    .join()
    .expect("the price history is synced");
    let bench = bench_lake(3, 2);

    assert_eq!(
        partitions(synced.path(), "price_history"),
        partitions(bench.path(), "price_history")
    );
    assert_eq!(
        partitions(bench.path(), "price_history"),
        ["2025-05-30", "2025-05-31"]
            .map(|d| format!("price_history/chain=evm-1/interval=60/date={d}"))
            .into()
    );
    let scan = |root: &Path| {
        Lake::open(root)
            .expect("the lake opens")
            .scan(Dataset::PriceHistory)
            .expect("a scan")
            .collect()
            .expect("the rows")
    };
    let (a, b) = (scan(synced.path()), scan(bench.path()));
    assert!(a.height() > 0, "the sync wrote points");
    assert_eq!(a.schema(), b.schema());

    // One point per token and minute, each token with its own pool.
    let per_token = b
        .clone()
        .lazy()
        .group_by([col("token_address")])
        .agg([
            len().alias("points"),
            col("timestamp").n_unique().alias("minutes"),
            col("pool_address").n_unique().alias("pools"),
            col("timestamp").min().alias("first"),
            col("timestamp").max().alias("last"),
        ])
        .collect()
        .expect("per token");
    assert_eq!(per_token.height(), 3);
    let ints = |name: &str| -> Vec<i64> {
        let c = per_token
            .column(name)
            .expect("a column")
            .cast(&DataType::Int64)
            .expect("integers");
        c.i64().expect("i64").iter().map(Option::unwrap).collect()
    };
    assert_eq!(ints("points"), vec![2880; 3]);
    assert_eq!(ints("minutes"), vec![2880; 3]);
    assert_eq!(ints("pools"), vec![1; 3]);
    let start = Utc.with_ymd_and_hms(2025, 5, 30, 0, 0, 0).unwrap();
    assert_eq!(ints("first"), vec![start.timestamp_micros(); 3]);
    let last = start + Duration::days(2) - Duration::minutes(1);
    assert_eq!(ints("last"), vec![last.timestamp_micros(); 3]);
}

#[test]
fn hourly_bars_of_the_bench_price_history_equal_a_polars_resampling() {
    let lake = bench_lake(3, 1);
    let out = tempfile::tempdir().expect("temp dir");
    let file = out.path().join("bars.parquet");
    dexlake(&[
        "ohlcv",
        "--lake",
        lake.path().to_str().expect("a UTF-8 path"),
        "--source",
        "price-history",
        "--chain-id",
        "1",
        "--all-tokens",
        "--interval",
        "3600",
        "--format",
        "parquet",
        "--out",
        file.to_str().expect("a UTF-8 path"),
    ]);
    let got = ParquetReader::new(std::fs::File::open(&file).expect("the bars file"))
        .finish()
        .expect("the bars");

    let hour = 3_600_000_000i64;
    let by_time = || SortMultipleOptions::default();
    let expected = Lake::open(lake.path())
        .expect("the lake opens")
        .scan(Dataset::PriceHistory)
        .expect("a scan")
        .with_column(col("timestamp").cast(DataType::Int64).alias("t"))
        .group_by([
            col("token_address"),
            ((col("t") / lit(hour)) * lit(hour)).alias("timestamp"),
        ])
        .agg([
            col("usd_price")
                .sort_by([col("t")], by_time())
                .first()
                .alias("open"),
            col("usd_price").max().alias("high"),
            col("usd_price").min().alias("low"),
            col("usd_price")
                .sort_by([col("t")], by_time())
                .last()
                .alias("close"),
            col("usd_volume").sum().alias("volume"),
            len().cast(DataType::Int64).alias("count"),
        ])
        .sort(["token_address", "timestamp"], by_time())
        .collect()
        .expect("the polars resampling");

    assert_eq!(got.height(), 3 * 24);
    assert_eq!(expected.height(), got.height());
    let strs = |df: &DataFrame| -> Vec<String> {
        let c = df.column("token_address").expect("tokens");
        c.str()
            .expect("strings")
            .iter()
            .map(|s| s.expect("a token").to_owned())
            .collect()
    };
    let ints = |df: &DataFrame, name: &str| -> Vec<i64> {
        let c = df
            .column(name)
            .expect("a column")
            .cast(&DataType::Int64)
            .expect("integers");
        c.i64().expect("i64").iter().map(Option::unwrap).collect()
    };
    let floats = |df: &DataFrame, name: &str| -> Vec<f64> {
        let c = df.column(name).expect("a column");
        c.f64().expect("f64").iter().map(Option::unwrap).collect()
    };
    assert_eq!(strs(&got), strs(&expected));
    assert_eq!(ints(&got, "timestamp"), ints(&expected, "timestamp"));
    assert_eq!(ints(&got, "count"), vec![60; 3 * 24]);
    assert_eq!(ints(&got, "count"), ints(&expected, "count"));
    // Prices are picked, not computed: equal to the bit.
    for name in ["open", "high", "low", "close"] {
        assert_eq!(floats(&got, name), floats(&expected, name), "{name}");
    }
    for (x, y) in floats(&got, "volume")
        .iter()
        .zip(floats(&expected, "volume"))
    {
        assert!(
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
            "volume {x} vs {y}"
        );
    }
    // The walks move: not every bar is flat.
    let (high, low) = (floats(&got, "high"), floats(&got, "low"));
    assert!(high.iter().zip(&low).any(|(h, l)| h > l));
    let incomplete = got.column("incomplete").expect("flags");
    assert!(
        incomplete
            .bool()
            .expect("booleans")
            .iter()
            .all(|f| f == Some(false)),
        "every hour is covered"
    );
}
