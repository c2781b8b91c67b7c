//! Price stats from a stored price history: a lake synced from the simulator over HTTP agrees
//! with the served EVM get-price-stats as `docs/series.md` ("Price stats from a series")
//! predicts, exactly where no swap falls on a period's boundary and by the boundary swaps'
//! volume where one does (a live simulator's clock moved onto such an instant);
//! `dexlake price-stats --source price-history` gives the query's frame; and what is refused.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use dexlake::Error;
use dexlake::api::models::{EvmPriceStats, PRICE_STATS_PERIOD_SECONDS, PriceHistorySeries};
use dexlake::api::models::{PriceChanges, PricePoint};
use dexlake::api::requests::EvmPricesRequest;
use dexlake::lake::{Dataset, Lake, convert};
use dexlake::query::LakeQuery as _;
use dexlake::sim::Simulator;
use dexlake::sync::{Job, SyncConfig, Syncer};
use polars::prelude::*;

use crate::common::lake::write_all;
use crate::common::{manual_live_sim, sim_client, tiny_sim};

/// One swap of the simulator's market: time (Unix seconds), token price, USD volume.
type Swap = (i64, f64, f64);

/// A lake with the price history of the tokens of EVM chain 1 of the tiny market (seed 11),
/// every 300 s and every 3,600 s since the market's start; the tokens, the simulator's `now`,
/// its served price stats of the tokens, and each token's swaps.
struct Synced {
    dir: tempfile::TempDir,
    lake: Lake,
    tokens: Vec<String>,
    now: DateTime<Utc>,
    served: Vec<EvmPriceStats>,
    swaps: Vec<Vec<Swap>>,
}

fn synced() -> Synced {
    in_runtime(|| async {
        let sim = tiny_sim(11).await;
        sync_at(sim).await
    })
}

/// [`synced`] from a live simulator of the tiny market (seed 11) whose clock is moved to an
/// instant on the 300 s grid with a swap of chain 1 at exactly it, or at exactly a period (or
/// two) before it: the rule's boundary cases against the served stats.
fn synced_on_a_boundary() -> Synced {
    in_runtime(|| async {
        let sim = manual_live_sim(11).await;
        let start = sim.now().timestamp();
        // Every swap of the live horizon, to pick the instant.
        let horizon = sim
            .market()
            .at(sim.now() + Duration::days(30))
            .expect("the live market later");
        let chain = horizon.evm_chain(1).expect("chain 1");
        let mut times: Vec<i64> = (0..chain.tokens.len() as u32)
            .flat_map(|ti| chain.stream(ti).iter().map(|s| s.time).collect::<Vec<_>>())
            .filter(|t| t % 300 == 0)
            .collect();
        times.sort_unstable();
        let now = times
            .iter()
            .flat_map(|&x| {
                std::iter::once(x).chain(
                    PRICE_STATS_PERIOD_SECONDS
                        .iter()
                        .flat_map(move |&p| [x + p, x + 2 * p]),
                )
            })
            .filter(|&t| t > start && t <= start + 30 * 86_400)
            .min()
            .expect("a swap on the 300 s grid");
        sim.advance((now - start) as u64).expect("the clock moves");
        sync_at(sim).await
    })
}

fn in_runtime<F: std::future::Future<Output = Synced>>(
    f: impl FnOnce() -> F + Send + 'static,
) -> Synced {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(f())
    })
    .join()
    .expect("the lake is synced")
}

/// Syncs the price history of chain 1's tokens from `sim` up to its now, every 300 s and
/// every 3,600 s, and fetches the served price stats.
async fn sync_at(sim: Simulator) -> Synced {
    let market = sim.market_now();
    let chain = market.evm_chain(1).expect("chain 1");
    let tokens: Vec<String> = chain.tokens.iter().map(|t| t.address.clone()).collect();
    let now = sim.now();
    let from = Utc.timestamp_opt(chain.start, 0).single().expect("start");
    let swaps = tokens
        .iter()
        .map(|t| {
            let ti = chain.token_index(t).expect("a token of the chain");
            chain
                .stream(ti)
                .iter()
                .map(|s| (s.time, s.token_price, s.usd()))
                .collect()
        })
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Arc::new(Lake::open(dir.path()).expect("lake"));
    let jobs = [300, 3600].map(|interval| Job::PriceHistory {
        chain_id: 1,
        tokens: tokens.clone(),
        pools: vec![],
        interval,
        from,
        to: Some(now),
    });
    let client = sim_client(&sim);
    let syncer = Syncer::new(client.clone(), Arc::clone(&lake), SyncConfig::default());
    let report = syncer.run(&jobs).await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
    let served = client
        .evm_price_stats(&EvmPricesRequest::for_tokens(1, tokens.clone()))
        .await
        .expect("the served price stats");
    sim.shutdown().await;
    drop(lake);
    let lake = Lake::open(dir.path()).expect("the lake opens");
    Synced {
        dir,
        lake,
        tokens,
        now,
        served,
        swaps,
    }
}

fn float(df: &DataFrame, name: &str, row: usize) -> Option<f64> {
    df.column(name).unwrap().f64().unwrap().get(row)
}

fn text(df: &DataFrame, name: &str, row: usize) -> String {
    df.column(name)
        .unwrap()
        .str()
        .unwrap()
        .get(row)
        .unwrap()
        .to_owned()
}

fn percent_change(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { 100.0 * (a / b - 1.0) }
}

/// USD volume of the swaps with time in `[lo, hi)`.
fn volume_in(swaps: &[Swap], lo: i64, hi: i64) -> f64 {
    swaps
        .iter()
        .filter(|s| s.0 >= lo && s.0 < hi)
        .map(|s| s.2)
        .sum()
}

/// USD volume of the swaps at exactly `x`.
fn volume_at(swaps: &[Swap], x: i64) -> f64 {
    volume_in(swaps, x, x + 1)
}

/// Whether a swap falls at exactly `x`.
fn swap_at(swaps: &[Swap], x: i64) -> bool {
    swaps.iter().any(|s| s.0 == x)
}

/// The last price before `x`, if any.
fn price_before(swaps: &[Swap], x: i64) -> Option<f64> {
    swaps.iter().take_while(|s| s.0 < x).last().map(|s| s.1)
}

/// Volumes agree up to the order of summation: within 1e-9 of `scale`.
fn same_sum(a: f64, b: f64, scale: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * scale
}

/// What [`agree`] compared: price changes equal to the served ones, volumes above zero,
/// periods with a swap on a boundary.
#[derive(Debug, Default)]
struct Compared {
    exact_prices: usize,
    nonzero_volumes: usize,
    boundary_volumes: usize,
    /// Volumes or volume changes that differ from the served ones (by the boundary swaps).
    differing: usize,
}

#[test]
fn stats_from_the_price_history_agree_with_the_served_stats_as_the_rule_predicts() {
    let compared = agree(&synced(), &[300, 3600]);
    // The comparison is not vacuous.
    assert!(compared.exact_prices > 20, "{compared:?}");
    assert!(compared.nonzero_volumes > 10, "{compared:?}");
}

#[test]
fn on_a_boundary_swap_the_stats_differ_from_the_served_ones_as_the_rule_predicts() {
    // Its now is on the 300 s grid only.
    let compared = agree(&synced_on_a_boundary(), &[300]);
    assert!(compared.boundary_volumes > 0, "{compared:?}");
    assert!(compared.differing > 0, "{compared:?}");
}

/// Asserts the rule of `docs/series.md` on the stats of `s` from the series of `intervals`.
fn agree(s: &Synced, intervals: &[i64]) -> Compared {
    let now = s.now.timestamp();
    let mut compared = Compared::default();
    for &interval in intervals {
        let ours = s
            .lake
            .query()
            .price_history(1)
            .tokens(&s.tokens)
            .series_interval(interval)
            .price_stats(Some(s.now))
            .expect("price stats from the price history");
        assert_eq!(ours.height(), s.served.len(), "one row per served token");
        for row in 0..ours.height() {
            let token = text(&ours, "token_address", row);
            let k = s.tokens.iter().position(|t| *t == token).expect("a token");
            let served = s
                .served
                .iter()
                .find(|x| x.token_address == token)
                .expect("served stats of the token");
            let swaps = &s.swaps[k];
            assert!(swaps.iter().all(|x| x.0 <= now), "no swap after now");

            // The latest price: the last before now (the service's, unless a swap is at now).
            let latest = float(&ours, "usd_price", row).expect("a price");
            let expected_latest = price_before(swaps, now).expect("a price before now");
            assert_eq!(latest, expected_latest, "{token}: latest price");
            if !swap_at(swaps, now) {
                assert_eq!(latest, served.usd_price, "{token}: the served latest price");
            }

            let first_interval = swaps[0].0.div_euclid(interval) * interval;
            let first_interval_price = swaps
                .iter()
                .take_while(|x| x.0 < first_interval + interval)
                .last()
                .expect("a first swap")
                .1;
            for (j, (name, &secs)) in PriceChanges::PERIODS
                .iter()
                .zip(PRICE_STATS_PERIOD_SECONDS.iter())
                .enumerate()
            {
                let change = float(&ours, &format!("usd_price_change_{name}"), row);
                let volume = float(&ours, &format!("usd_volume_{name}"), row);
                let volume_change = float(&ours, &format!("usd_volume_change_{name}"), row);
                if secs % interval != 0 {
                    assert_eq!(
                        (change, volume, volume_change),
                        (None, None, None),
                        "{token} {name}: an interval of {interval} s does not divide it"
                    );
                    continue;
                }
                let (change, volume, volume_change) = (
                    change.expect("a change"),
                    volume.expect("a volume"),
                    volume_change.expect("a volume change"),
                );
                let (served_change, served_volume, served_volume_change) =
                    served.changes.by_period()[j];

                // Price change: the served one unless a swap falls at now or now − p or
                // the token is younger than p; else the rule's prices.
                let young = swaps[0].0 >= now - secs;
                if !young && !swap_at(swaps, now) && !swap_at(swaps, now - secs) {
                    assert_eq!(change, served_change, "{token} {name}: price change");
                    compared.exact_prices += 1;
                } else {
                    let base = price_before(swaps, now - secs).unwrap_or(first_interval_price);
                    assert_eq!(
                        change,
                        percent_change(expected_latest, base),
                        "{token} {name}: price change by the rule"
                    );
                }

                // Volume: the served one, plus the swaps at now − p, less those at now.
                let (at_start, at_now) = (volume_at(swaps, now - secs), volume_at(swaps, now));
                let predicted = served_volume + at_start - at_now;
                if !same_sum(volume, served_volume, volume.max(served_volume)) {
                    compared.differing += 1;
                }
                assert!(
                    same_sum(volume, predicted, served_volume + at_start + at_now),
                    "{token} {name}: volume {volume}, predicted {predicted} (served \
                     {served_volume}, {at_start} at now − p, {at_now} at now)"
                );
                let previous = volume_in(swaps, now - 2 * secs, now - secs);
                assert!(
                    same_sum(volume, volume_in(swaps, now - secs, now), volume.abs()),
                    "{token} {name}: the volume of [now − p, now)"
                );
                if volume > 0.0 {
                    compared.nonzero_volumes += 1;
                }
                if [now, now - secs, now - 2 * secs]
                    .iter()
                    .any(|&x| swap_at(swaps, x))
                {
                    compared.boundary_volumes += 1;
                }

                // Volume change: the served one when no swap is on a boundary.
                let expected = percent_change(volume, previous);
                assert!(
                    (volume_change - expected).abs() <= 1e-9 * (expected.abs() + 100.0),
                    "{token} {name}: volume change {volume_change}, by the rule {expected}"
                );
                if [now, now - secs, now - 2 * secs]
                    .iter()
                    .all(|&x| !swap_at(swaps, x))
                {
                    assert!(
                        (volume_change - served_volume_change).abs()
                            <= 1e-9 * (served_volume_change.abs() + 100.0),
                        "{token} {name}: volume change {volume_change}, served \
                         {served_volume_change}"
                    );
                } else if (volume_change - served_volume_change).abs()
                    > 1e-9 * (served_volume_change.abs() + 100.0)
                {
                    compared.differing += 1;
                }
            }
        }
    }
    compared
}

#[test]
fn the_cli_gives_the_frame_of_the_query_and_refuses_the_same_way() {
    let s = synced();
    let root = s.dir.path().to_str().expect("a UTF-8 path");
    let tokens = s.tokens.join(",");
    let query = || s.lake.query().price_history(1).tokens(&s.tokens);

    // The default `now` is the end of the latest stored point's interval (the finest
    // interval, 300 s): synced up to the simulator's now, its now.
    let expected = query().price_stats(None).expect("price stats");
    let latest = s
        .lake
        .scan(Dataset::PriceHistory)
        .expect("a scan")
        .filter(col("interval").eq(lit(300i64)))
        .select([col("timestamp").cast(DataType::Int64).max()])
        .collect()
        .expect("the latest point");
    let latest = latest.column("timestamp").unwrap().i64().unwrap().get(0);
    let latest_end =
        DateTime::from_timestamp_micros(latest.expect("a point")).unwrap() + Duration::seconds(300);
    assert_eq!(latest_end, s.now, "the points end by the simulator's now");
    let at_end = query()
        .price_stats(Some(latest_end))
        .expect("price stats at the end of the latest point");
    assert!(expected.equals_missing(&at_end), "{expected:?}\n{at_end:?}");

    let file = s.dir.path().join("stats.parquet");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "price-stats",
            "--lake",
            root,
            "--tokens",
            &tokens,
            "--source",
            "price-history",
            "--format",
            "parquet",
            "--out",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = dexlake(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ParquetReader::new(std::fs::File::open(&file).expect("the stats file"))
            .finish()
            .expect("a Parquet file")
    };
    let written = run(&["--chain-id", "1"]);
    assert!(
        written.equals_missing(&expected),
        "{written:?}\n{expected:?}"
    );
    let now = s.now.timestamp().to_string();
    let written = run(&[
        "--chain-id",
        "1",
        "--now",
        &now,
        "--series-interval",
        "3600",
    ]);
    let hourly = query()
        .series_interval(3600)
        .price_stats(Some(s.now))
        .expect("hourly price stats");
    assert!(written.equals_missing(&hourly), "{written:?}\n{hourly:?}");
    assert_eq!(
        hourly.column("usd_volume_5m").unwrap().null_count(),
        hourly.height(),
        "an hourly series has no 5m figures"
    );

    // Refusals: a price history needs its chain; only a price history takes one; `now` on
    // the series' grid.
    let refuse = |extra: &[&str], needles: &[&str]| {
        let mut args = vec!["price-stats", "--lake", root, "--tokens", &tokens];
        args.extend_from_slice(extra);
        usage_error(&dexlake(&args), needles);
    };
    refuse(&["--source", "price-history"], &["chain_id"]);
    refuse(&["--source", "swaps", "--chain-id", "1"], &["chain_id"]);
    let off_grid = (s.now.timestamp() + 60).to_string();
    refuse(
        &[
            "--source",
            "price-history",
            "--chain-id",
            "1",
            "--now",
            &off_grid,
        ],
        &["not on the grid", "300 s"],
    );
    refuse(
        &["--source", "swaps", "--series-interval", "300"],
        &["series interval"],
    );
}

/// Minute points of `token` from `start` (Unix seconds) for `minutes`: price `m + 1`, volume 1.
fn minutes(token: &str, start: i64, minutes: i64) -> PriceHistorySeries {
    PriceHistorySeries {
        token_address: token.into(),
        pool_address: format!("pool-{token}"),
        prices: (0..minutes)
            .map(|m| PricePoint {
                timestamp: Utc.timestamp_opt(start + 60 * m, 0).single().unwrap(),
                usd_price: (m + 1) as f64,
                usd_volume: 1.0,
            })
            .collect(),
    }
}

const START: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

#[test]
fn a_query_of_price_stats_from_a_written_history_follows_the_rule_and_refuses_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("lake");
    let series = [minutes("0xaaa", START, 120), minutes("0xbbb", START, 30)];
    let batch = convert::price_history_to_batch(1, 60, &series).expect("a batch");
    write_all(&lake, &[(Dataset::PriceHistory, batch)]);
    let query = || lake.query().price_history(1);

    // Default now: the end of the latest point, minute 120.
    let answer = query()
        .tokens(["0xaaa", "0xbbb", "0xnone"])
        .price_stats_covered(None)
        .expect("price stats");
    let df = &answer.value;
    assert_eq!(df.height(), 2);
    assert_eq!(text(df, "token_address", 0), "0xaaa");
    assert_eq!(float(df, "usd_price", 0), Some(120.0));
    assert_eq!(float(df, "usd_price", 1), Some(30.0));
    let end = df
        .column("block_time")
        .unwrap()
        .datetime()
        .unwrap()
        .physical()
        .get(0);
    assert_eq!(end, Some((START + 7200) * 1_000_000));
    assert_eq!(df.column("block_slot").unwrap().null_count(), 2);
    // 5m: base 115 (the point ending at now − 5m), 5 points, as many before.
    assert_eq!(
        float(df, "usd_price_change_5m", 0),
        Some(100.0 * (120.0 / 115.0 - 1.0))
    );
    assert_eq!(float(df, "usd_volume_5m", 0), Some(5.0));
    assert_eq!(float(df, "usd_volume_change_5m", 0), Some(0.0));
    // 1h of the token whose points stop at minute 30: no points in the last hour.
    assert_eq!(float(df, "usd_volume_1h", 1), Some(0.0));
    assert_eq!(float(df, "usd_volume_change_1h", 1), Some(-100.0));
    assert_eq!(float(df, "usd_price_change_1h", 1), Some(0.0));
    // 6h: both are younger; their first point is the base.
    assert_eq!(
        float(df, "usd_price_change_6h", 0),
        Some(100.0 * (120.0 - 1.0))
    );
    assert!(
        answer.warnings.iter().any(|w| w.text.contains("0xnone")),
        "{:?}",
        answer.warnings
    );
    // A `now` before every point is no data.
    match query()
        .token("0xaaa")
        .price_stats(Some(Utc.timestamp_opt(START, 0).single().unwrap()))
    {
        Err(Error::NoData { what }) => assert!(what.contains("price_history of chain 1"), "{what}"),
        other => panic!("no data, not {other:?}"),
    }

    let refused = |r: dexlake::Result<DataFrame>, argument: &str| match r {
        Err(Error::InvalidArgument { argument: a, .. }) => assert_eq!(a, argument),
        other => panic!("refused on {argument}, not {other:?}"),
    };
    let at = |s: i64| Some(Utc.timestamp_opt(START + s, 0).single().unwrap());
    refused(query().wallet("w").price_stats(None), "wallet");
    refused(
        query()
            .since(Utc.timestamp_opt(START, 0).single().unwrap())
            .price_stats(None),
        "range",
    );
    refused(query().price_stats(at(90)), "now");
    refused(
        query().series_interval(0).price_stats(None),
        "series interval",
    );
    refused(lake.query().candles().price_stats(None), "source");
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
