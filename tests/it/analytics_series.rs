//! Bars from stored series: the candles of a lake synced from the simulator resampled to hours
//! (closed or labelled on the right, with an offset) and to calendar days equal the bars of the same token's swaps, price history resampled
//! equals a polars resampling of the same points, and the refusals and gaps; the same bars
//! through the query and `dexlake ohlcv --source candles|price-history`.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use dexlake::Error;
use dexlake::analytics::ohlcv::{SeriesSelection, SeriesSource, series_bars};
use dexlake::analytics::{BarOptions, Edge, EventSource, Fill, Selection, TimeRange, bars};
use dexlake::api::models::{PriceHistorySeries, PricePoint};
use dexlake::lake::{Dataset, Lake, convert};
use dexlake::query::{Bars, LakeQuery as _, WarningKind};
use dexlake::sync::{Job, SyncConfig, Syncer};
use polars::prelude::*;

use crate::common::lake::write_all;
use crate::common::{sim_client, tiny_sim};

/// A lake with the swaps and the 60 s candles of the most active token of the tiny market
/// (seed 5) over its last 4 days; the token and the first whole UTC day of the candles.
fn synced_lake() -> (tempfile::TempDir, Lake, String, DateTime<Utc>) {
    std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let sim = tiny_sim(5).await;
            let dir = tempfile::tempdir().expect("temp dir");
            let lake = Arc::new(Lake::open(dir.path()).expect("lake"));
            let token = sim.market().catalog().altchain.tokens[0].address.clone();
            let from = sim.market().now() - Duration::days(4);
            let jobs = [
                Job::Swaps {
                    token: Some(token.clone()),
                    wallet: None,
                    pool: None,
                },
                Job::Candles {
                    token: Some(token.clone()),
                    pool: None,
                    interval: 60,
                    from,
                    to: None,
                },
            ];
            let syncer = Syncer::new(sim_client(&sim), Arc::clone(&lake), SyncConfig::default());
            let report = syncer.run(&jobs).await;
            assert!(!report.any_failed(), "sync failed: {report:?}");
            sim.shutdown().await;
            let day = from.timestamp().div_euclid(86_400) * 86_400 + 86_400;
            let day = Utc.timestamp_opt(day, 0).single().expect("a day");
            drop(lake);
            let lake = Lake::open(dir.path()).expect("the lake opens");
            (dir, lake, token, day)
        })
    })
    .join()
    .expect("the lake is synced")
}

fn times(df: &DataFrame) -> Vec<i64> {
    df.column("timestamp")
        .unwrap()
        .datetime()
        .unwrap()
        .physical()
        .iter()
        .map(Option::unwrap)
        .collect()
}

fn floats(df: &DataFrame, name: &str) -> Vec<Option<f64>> {
    df.column(name).unwrap().f64().unwrap().iter().collect()
}

fn ints(df: &DataFrame, name: &str) -> Vec<i64> {
    let c = df.column(name).unwrap().cast(&DataType::Int64).unwrap();
    c.i64().unwrap().iter().map(Option::unwrap).collect()
}

fn flags(df: &DataFrame) -> Vec<bool> {
    let c = df.column("incomplete").unwrap();
    c.bool().unwrap().iter().map(Option::unwrap).collect()
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn resampled_candles_equal_the_bars_of_the_swaps_bucket_by_bucket() {
    let (_dir, lake, token, day) = synced_lake();
    let range = TimeRange {
        from: Some(day),
        to: None,
    };
    let hourly = BarOptions::with_width(3600);
    // A candle holds the swaps of `[t, t + 60)`, so bars of candles closed on the right (a
    // bucket `(s, e]` takes the candles whose interval ends in it) hold the swaps of `[s, e)`:
    // the swap bars closed on the left, labelled on the right.
    let right = BarOptions {
        closed: Edge::Right,
        label: Edge::Right,
        ..hourly.clone()
    };
    let right_label = BarOptions {
        label: Edge::Right,
        ..hourly.clone()
    };
    let half_past = BarOptions {
        offset_seconds: 1800,
        ..hourly.clone()
    };
    let new_york_days = BarOptions {
        time_zone: Some("America/New_York".into()),
        ..BarOptions::with_width(86_400)
    };
    let widths = [
        (hourly.clone(), hourly),
        (right, right_label),
        (half_past.clone(), half_past),
        (new_york_days.clone(), new_york_days),
    ];
    for (options, swap_options) in widths {
        let from_swaps = bars(
            &lake,
            EventSource::Swaps,
            &Selection::Token(token.clone()),
            range,
            &swap_options,
        )
        .expect("bars of the swaps");
        let selection = SeriesSelection {
            tokens: Some(vec![token.clone()]),
            range,
            ..SeriesSelection::default()
        };
        let from_candles = series_bars(&lake, SeriesSource::Candles, &selection, &options)
            .expect("bars of the candles");
        let swap_t = times(&from_swaps);
        let swap_flags = flags(&from_swaps);
        let (t, incomplete) = (times(&from_candles), flags(&from_candles));
        let mut compared = 0;
        for (k, &at) in t.iter().enumerate() {
            let Ok(j) = swap_t.binary_search(&at) else {
                panic!("a candle bar at {at} has no swap bar");
            };
            if incomplete[k] || swap_flags[j] {
                continue;
            }
            for name in ["open", "high", "low", "close", "volume"] {
                let (a, b) = (floats(&from_candles, name)[k], floats(&from_swaps, name)[j]);
                let (a, b) = (a.expect("a value"), b.expect("a value"));
                assert!(
                    close(a, b),
                    "{name} at {at}: {a} from candles, {b} from swaps"
                );
            }
            assert_eq!(
                ints(&from_candles, "count")[k],
                ints(&from_swaps, "count")[j],
                "count at {at}"
            );
            compared += 1;
        }
        // Every covered bar of the swaps has its bar from the candles.
        let covered = swap_t
            .iter()
            .zip(&swap_flags)
            .filter(|&(at, &f)| !f && *at >= t[0] && *at < *t.last().unwrap())
            .count();
        assert!(
            compared + 1 >= covered && compared > 1,
            "{compared} bars compared of {covered} (width {})",
            options.width_seconds
        );
        assert!(
            floats(&from_candles, "vwap").iter().all(Option::is_none),
            "a series has no vwap"
        );
    }
}

/// Points of `token` every minute from `start` (Unix seconds) for `minutes`, but `skip`.
fn points(token: &str, start: i64, minutes: i64, skip: impl Fn(i64) -> bool) -> PriceHistorySeries {
    PriceHistorySeries {
        token_address: token.into(),
        pool_address: format!("pool-{token}"),
        prices: (0..minutes)
            .filter(|m| !skip(*m))
            .map(|m| PricePoint {
                timestamp: Utc.timestamp_opt(start + 60 * m, 0).single().unwrap(),
                usd_price: 1.0 + ((m * 37 + token.len() as i64) % 101) as f64 / 7.0,
                usd_volume: ((m * 13) % 17) as f64 * 2.5,
            })
            .collect(),
    }
}

/// A lake holding the price history of chain 1 of `series`, 60 s apart.
fn history_lake(series: &[PriceHistorySeries]) -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("lake");
    let batch = convert::price_history_to_batch(1, 60, series).expect("a batch");
    write_all(&lake, &[(Dataset::PriceHistory, batch)]);
    (dir, lake)
}

const START: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

#[test]
fn resampled_price_history_equals_a_polars_resampling_of_the_points() {
    let series = [
        points("0xaaa", START, 180, |_| false),
        points("0xbbbb", START + 3600, 120, |_| false),
    ];
    let (_dir, lake) = history_lake(&series);
    let options = BarOptions::with_width(900);
    let got = series_bars(
        &lake,
        SeriesSource::PriceHistory { chain_id: 1 },
        &SeriesSelection::default(),
        &options,
    )
    .expect("bars of the price history");

    let mut token = Vec::new();
    let (mut t, mut price, mut volume) = (Vec::new(), Vec::new(), Vec::new());
    for s in &series {
        for p in &s.prices {
            token.push(s.token_address.clone());
            t.push(p.timestamp.timestamp_micros());
            price.push(p.usd_price);
            volume.push(p.usd_volume);
        }
    }
    let width = 900_000_000i64;
    let expected = df!(
        "token_address" => token,
        "t" => t,
        "price" => price,
        "volume" => volume,
    )
    .unwrap()
    .lazy()
    .with_column(((col("t") / lit(width)) * lit(width)).alias("timestamp"))
    .group_by([col("token_address"), col("timestamp")])
    .agg([
        col("price")
            .sort_by([col("t")], SortMultipleOptions::default())
            .first()
            .alias("open"),
        col("price").max().alias("high"),
        col("price").min().alias("low"),
        col("price")
            .sort_by([col("t")], SortMultipleOptions::default())
            .last()
            .alias("close"),
        col("volume").sum().alias("volume"),
        col("price").count().cast(DataType::Int64).alias("count"),
    ])
    .sort(
        ["token_address", "timestamp"],
        SortMultipleOptions::default(),
    )
    .collect()
    .unwrap();

    assert_eq!(got.height(), expected.height());
    assert_eq!(got.height(), 12 + 8);
    assert_eq!(
        got.column("token_address")
            .unwrap()
            .as_materialized_series(),
        expected
            .column("token_address")
            .unwrap()
            .as_materialized_series()
    );
    assert_eq!(times(&got), ints(&expected, "timestamp"));
    for name in ["open", "high", "low", "close", "volume"] {
        let (a, b) = (floats(&got, name), floats(&expected, name));
        for (x, y) in a.iter().zip(&b) {
            assert!(close(x.unwrap(), y.unwrap()), "{name}: {x:?} and {y:?}");
        }
    }
    assert_eq!(ints(&got, "count"), ints(&expected, "count"));
    assert!(
        flags(&got).iter().all(|f| !f),
        "no bucket is partly covered"
    );
}

#[test]
fn a_width_not_a_multiple_of_the_series_interval_is_refused_naming_both() {
    let (_dir, lake) = history_lake(&[points("0xaaa", START, 60, |_| false)]);
    let source = SeriesSource::PriceHistory { chain_id: 1 };
    let asked = SeriesSelection {
        series_interval: Some(60),
        ..SeriesSelection::default()
    };
    let refused = |r: dexlake::Result<DataFrame>, needles: &[&str]| match r {
        Err(Error::InvalidArgument { reason, .. }) => {
            for n in needles {
                assert!(reason.contains(n), "{reason:?} names {n}");
            }
        }
        other => panic!("refused, not {other:?}"),
    };
    let options = BarOptions::with_width(90);
    refused(
        series_bars(&lake, source, &asked, &options),
        &["90 s", "60 s"],
    );
    refused(
        series_bars(&lake, source, &SeriesSelection::default(), &options),
        &["90 s", "stored: 60 s"],
    );
    // A grid whose buckets split the series' intervals.
    let shifted = BarOptions {
        offset_seconds: 30,
        ..BarOptions::with_width(600)
    };
    refused(series_bars(&lake, source, &asked, &shifted), &["60 s"]);
}

#[test]
fn a_gap_in_the_price_history_is_flagged_and_not_filled_across() {
    // Minutes 20 to 49 of the first hour are missing.
    let (_dir, lake) = history_lake(&[points("0xaaa", START, 120, |m| (20..50).contains(&m))]);
    let options = BarOptions {
        fill: Fill::Null,
        ..BarOptions::with_width(900)
    };
    let got = series_bars(
        &lake,
        SeriesSource::PriceHistory { chain_id: 1 },
        &SeriesSelection::default(),
        &options,
    )
    .expect("bars");
    let minute = 60_000_000;
    let at: Vec<i64> = times(&got)
        .iter()
        .map(|t| (t - START * 1_000_000) / minute)
        .collect();
    // The bucket of minutes 30 to 44 lies wholly in the gap: no row, and no filled row.
    assert_eq!(at, vec![0, 15, 45, 60, 75, 90, 105]);
    assert_eq!(
        flags(&got),
        vec![false, true, true, false, false, false, false]
    );
    assert_eq!(ints(&got, "count"), vec![15, 5, 10, 15, 15, 15, 15]);
}

/// `series` with only the points whose minute since `start` (Unix seconds) `keep` holds.
fn only(series: &PriceHistorySeries, start: i64, keep: impl Fn(i64) -> bool) -> PriceHistorySeries {
    PriceHistorySeries {
        prices: series
            .prices
            .iter()
            .filter(|p| keep((p.timestamp.timestamp() - start) / 60))
            .cloned()
            .collect(),
        ..series.clone()
    }
}

#[test]
fn a_series_committed_out_of_time_order_gives_the_bars_and_stats_of_one_ordered_write() {
    // Two tokens over two UTC days; the second lake gets the first token's later points in a
    // first commit and its earlier points (same day) in a second, so its files of a day are
    // not in time order.
    let start = START - 3600;
    let (a, b) = (
        points("0xaaa", start, 180, |_| false),
        points("0xbbbb", start + 1800, 120, |m| m == 7),
    );
    let (_one, ordered) = history_lake(&[a.clone(), b.clone()]);
    let dir = tempfile::tempdir().expect("temp dir");
    let shuffled = Lake::open(dir.path()).expect("lake");
    for part in [
        vec![only(&a, start, |m| m >= 45), b.clone()],
        vec![only(&a, start, |m| m < 45)],
    ] {
        let batch = convert::price_history_to_batch(1, 60, &part).expect("a batch");
        write_all(&shuffled, &[(Dataset::PriceHistory, batch)]);
    }
    let source = SeriesSource::PriceHistory { chain_id: 1 };
    for options in [
        BarOptions::with_width(900),
        BarOptions {
            fill: Fill::Null,
            closed: Edge::Right,
            ..BarOptions::with_width(3600)
        },
    ] {
        let bars = |lake: &Lake| {
            series_bars(lake, source, &SeriesSelection::default(), &options).expect("bars")
        };
        let (want, got) = (bars(&ordered), bars(&shuffled));
        assert!(want.height() > 0);
        assert!(got.equals_missing(&want), "{got} and {want}");
    }
    let now = Utc.timestamp_opt(START + 3600, 0).single();
    let stats = |lake: &Lake| {
        dexlake::analytics::series_price_stats(lake, source, &SeriesSelection::default(), now)
            .expect("stats")
    };
    let (want, got) = (stats(&ordered), stats(&shuffled));
    assert_eq!(want.height(), 2);
    assert!(got.equals_missing(&want), "{got} and {want}");
}

#[test]
fn a_token_stored_for_two_pools_is_refused_naming_the_first_such_token_and_its_pools() {
    let (_dir, lake) = history_lake(&[
        points("0xaaa", START, 30, |_| false),
        points("0xbbbb", START, 30, |_| false),
        points("0xccc", START, 30, |_| false),
    ]);
    // Later points of 0xccc and 0xbbbb from other pools, in a second commit.
    let other = |token: &str, pool: &str| PriceHistorySeries {
        pool_address: pool.into(),
        ..points(token, START + 1800, 10, |_| false)
    };
    let batch = convert::price_history_to_batch(
        1,
        60,
        &[other("0xccc", "pool-c2"), other("0xbbbb", "pool-a")],
    )
    .expect("a batch");
    write_all(&lake, &[(Dataset::PriceHistory, batch)]);
    let source = SeriesSource::PriceHistory { chain_id: 1 };
    let options = BarOptions::with_width(600);
    match series_bars(&lake, source, &SeriesSelection::default(), &options) {
        Err(Error::InvalidArgument { argument, reason }) => {
            assert_eq!(argument, "pool");
            assert_eq!(
                reason,
                format!(
                    "the {} of 0xbbbb are stored for more than one pool (\"pool-0xbbbb\", \
                     \"pool-a\"); select one pool",
                    Dataset::PriceHistory
                )
            );
        }
        other => panic!("refused, not {other:?}"),
    }
    // One pool selected: its records only.
    let one = SeriesSelection {
        pool: Some("pool-a".into()),
        ..SeriesSelection::default()
    };
    let got = series_bars(&lake, source, &one, &options).expect("bars of one pool");
    assert_eq!(ints(&got, "count"), vec![10]);
    // A token of one pool is not refused.
    let single = SeriesSelection {
        tokens: Some(vec!["0xaaa".into()]),
        ..SeriesSelection::default()
    };
    let got = series_bars(&lake, source, &single, &options).expect("bars of one token");
    assert_eq!(ints(&got, "count"), vec![10, 10, 10]);
}

/// Runs `dexlake args` and returns its output.
fn dexlake(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .output()
        .expect("the dexlake binary runs")
}

/// Asserts that `out` is a usage error (exit 2) whose message names each of `needles`.
fn usage_error(out: &std::process::Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
}

#[test]
fn the_cli_and_the_query_give_the_same_bars_of_candles_and_refuse_the_same_way() {
    let (dir, lake, token, day) = synced_lake();
    let root = dir.path().to_str().expect("a UTF-8 path");
    let from = day.timestamp().to_string();
    let expected = lake
        .query()
        .candles()
        .token(&token)
        .since(day)
        .bars(Bars::every(3600).fill(Fill::ForwardFill))
        .expect("bars of the candles");
    assert!(expected.height() > 24, "{} bars", expected.height());
    assert!(
        expected.column("token_address").is_err(),
        "one token's bars carry no token column"
    );

    // Parquet: the very frame of the query.
    let file = dir.path().join("candle-bars.parquet");
    let ohlcv = |extra: &[&str]| {
        let mut args = vec![
            "ohlcv", "--lake", root, "--token", &token, "--from", &from, "--fill", "ffill",
        ];
        args.extend_from_slice(extra);
        args.iter().map(|s| s.to_string()).collect::<Vec<String>>()
    };
    let args = ohlcv(&[
        "--source",
        "candles",
        "--interval",
        "3600",
        "--format",
        "parquet",
        "--out",
        file.to_str().unwrap(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = dexlake(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = ParquetReader::new(std::fs::File::open(&file).expect("the bars file"))
        .finish()
        .expect("a Parquet file");
    assert!(
        written.equals_missing(&expected),
        "{written:?}\n{expected:?}"
    );

    // CSV: a header and one line per bar, the series' missing columns empty.
    let args = ohlcv(&[
        "--source",
        "candles",
        "--interval",
        "3600",
        "--format",
        "csv",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = dexlake(&args);
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).expect("UTF-8");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), expected.height() + 1);
    assert_eq!(
        lines[0],
        "timestamp,open,high,low,close,volume,base_volume,buy_volume,sell_volume,sum_pq,sum_q,incomplete,count,vwap"
    );
    assert!(lines[1].ends_with(','), "no vwap: {}", lines[1]);

    // Price history needs its chain; only price history takes one.
    let args = ohlcv(&["--source", "price-history", "--interval", "3600"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&dexlake(&args), &["chain_id"]);
    let args = ohlcv(&[
        "--source",
        "candles",
        "--chain-id",
        "1",
        "--interval",
        "3600",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&dexlake(&args), &["chain_id"]);
    // A width that is not a multiple of the series interval names both.
    let args = ohlcv(&[
        "--source",
        "candles",
        "--series-interval",
        "60",
        "--interval",
        "90",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&dexlake(&args), &["90 s", "60 s"]);
    // Tick bars need events; a series interval needs a series.
    let args = [
        "ohlcv", "--lake", root, "--token", &token, "--source", "candles", "--ticks", "10",
    ];
    usage_error(&dexlake(&args), &["time bars only"]);
    let args = ohlcv(&["--series-interval", "60", "--interval", "3600"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&dexlake(&args), &["series interval"]);
}

#[test]
fn a_query_of_a_series_answers_bars_only_and_names_what_it_did_not_find() {
    let (_dir, lake) = history_lake(&[points("0xaaa", START, 120, |_| false)]);
    let query = || lake.query().price_history(1);
    // Bars of a list name the tokens without a series.
    let answer = query()
        .tokens(["0xaaa", "0xnone"])
        .bars_covered(Bars::every(900))
        .expect("bars of the price history");
    assert_eq!(answer.value.height(), 8);
    assert!(
        answer
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::NoEvents && w.text.contains("0xnone")),
        "{:?}",
        answer.warnings
    );
    // Nothing found is NoData; another chain holds nothing.
    match lake.query().price_history(2).bars(Bars::every(900)) {
        Err(Error::NoData { what }) => assert!(what.contains("price_history of chain 2"), "{what}"),
        other => panic!("no data, not {other:?}"),
    }
    // What a series cannot answer is refused.
    let refused = |r: dexlake::Result<DataFrame>, argument: &str| match r {
        Err(Error::InvalidArgument { argument: a, .. }) => assert_eq!(a, argument),
        other => panic!("refused on {argument}, not {other:?}"),
    };
    refused(query().bars(Bars::ticks(10)), "bars");
    refused(query().wallet("w").bars(Bars::every(900)), "wallet");
    refused(
        lake.query().candles().token("0xaaa").price_stats(None),
        "source",
    );
    refused(
        lake.query().series_interval(60).bars(Bars::every(900)),
        "series interval",
    );
    refused(
        query().series_interval(60).bars(Bars::every(90)),
        "series interval",
    );
}
