//! What the lake covers: `dexlake status` and the coverage the analytics report, on lakes
//! synced from the simulator with holes made on purpose (a day of candles not synced, a
//! stream interrupted after its first page, a wallet synced by token only).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use dexlake::analytics::{BarOptions, EventSource, Fill, Selection, TimeRange};
use dexlake::coverage;
use dexlake::lake::{Dataset, Lake};
use dexlake::prelude::*;
use dexlake::sim::Simulator;
use dexlake::sync::{CancelToken, Job, JobOutcome, SyncConfig, SyncEvent, SyncObserver, Syncer};
use polars::prelude::*;

use crate::common;

/// Cancels the run at the first page received: with one page per hand-off, the lake keeps
/// exactly the stream's newest page and an interrupted run.
struct CancelAtFirstPage(CancelToken, AtomicBool);

impl SyncObserver for CancelAtFirstPage {
    fn on_event(&self, event: SyncEvent) {
        if let SyncEvent::Progress { .. } = event
            && !self.1.swap(true, Ordering::SeqCst)
        {
            self.0.cancel();
        }
    }
}

fn config() -> SyncConfig {
    SyncConfig {
        recent_window: Duration::ZERO,
        pages_per_handoff: 1,
        parallel_jobs: 1,
        ..SyncConfig::default()
    }
}

async fn sync(sim: &Simulator, lake: &Arc<Lake>, jobs: &[Job]) {
    let syncer = Syncer::new(common::sim_client(sim), Arc::clone(lake), config());
    let report = syncer.run(jobs).await;
    for j in &report.jobs {
        assert_eq!(j.outcome, JobOutcome::Done, "{}", j.job);
    }
}

/// Syncs `job` and interrupts it after its first page.
async fn sync_interrupted(sim: &Simulator, lake: &Arc<Lake>, job: Job) {
    let syncer = Syncer::new(common::sim_client(sim), Arc::clone(lake), config());
    let cancel = CancelToken::new();
    let observer = CancelAtFirstPage(cancel.clone(), AtomicBool::new(false));
    let report = syncer.run_with(&[job], &observer, &cancel).await;
    assert_eq!(report.jobs[0].outcome, JobOutcome::Interrupted);
}

fn swaps_of(token: &str) -> Job {
    Job::Swaps {
        token: Some(token.to_owned()),
        wallet: None,
        pool: None,
    }
}

/// The simulator's most swapped token and its simulated present.
fn busiest_token(sim: &Simulator) -> (String, DateTime<Utc>) {
    let catalog = sim.market().catalog();
    (catalog.altchain.tokens[0].address.clone(), catalog.now)
}

fn micros_min_max(lake: &Lake, dataset: Dataset) -> (i64, i64, usize) {
    let df = lake
        .scan(dataset)
        .unwrap()
        .select([
            col("block_time").cast(DataType::Int64).min().alias("min"),
            col("block_time").cast(DataType::Int64).max().alias("max"),
            len().alias("n"),
        ])
        .collect()
        .unwrap();
    let get = |c: &str| df.column(c).unwrap().i64().unwrap().get(0).unwrap();
    let n = df.column("n").unwrap().u32().unwrap().get(0).unwrap() as usize;
    (get("min"), get("max"), n)
}

fn at(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap()
}

/// Removes every data file of the lake (the manifest stays).
fn remove_data_files(dir: &Path) -> usize {
    let mut removed = 0;
    for entry in walkdir(dir) {
        if entry.extension().is_some_and(|e| e == "parquet") {
            std::fs::remove_file(&entry).unwrap();
            removed += 1;
        }
    }
    removed
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_exactly_the_fetched_ranges_and_reads_no_data_file() {
    let sim = common::tiny_sim(11).await;
    let (token, now) = busiest_token(&sim);
    let wallet = sim.market().catalog().altchain.wallets[0].address.clone();
    let day = now.duration_trunc(TimeDelta::days(1)).unwrap();
    let d = |n: i64| day - TimeDelta::days(n);
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let started = Utc::now();
    // Candles of two days with the day between them never synced.
    let candles = |from, to| Job::Candles {
        token: Some(token.clone()),
        pool: None,
        interval: 300,
        from,
        to: Some(to),
    };
    let trades = Job::Trades {
        token: None,
        wallet: Some(wallet.clone()),
    };
    // Both ranges of the series in one run: each job reads the state as the run found it,
    // and the commit keeps the ranges of both.
    sync(
        &sim,
        &lake,
        &[candles(d(3), d(2)), trades, candles(d(1), d(0))],
    )
    .await;
    sync_interrupted(&sim, &lake, swaps_of(&token)).await;

    let status = coverage::status(&lake).unwrap();
    let of = |dataset: Dataset| {
        status
            .datasets
            .iter()
            .find(|s| s.dataset == dataset)
            .unwrap_or_else(|| panic!("{dataset} in {status:#?}"))
    };
    // Candles: exactly the two days synced.
    let candles = of(Dataset::Candles);
    assert_eq!(candles.targets.len(), 1, "{candles:#?}");
    let series = &candles.targets[0];
    assert_eq!(series.target, format!("token={token} interval=300"));
    let span = |from: DateTime<Utc>, to: DateTime<Utc>| TimeRange {
        from: Some(from),
        to: Some(to),
    };
    assert_eq!(series.fetched, vec![span(d(3), d(2)), span(d(1), d(0))]);
    assert!(series.synced_at.is_some_and(|t| t >= started));

    // Swaps: the interrupted stream holds its newest page, from just after its oldest record.
    let swaps = of(Dataset::Swaps);
    let stream = &swaps.targets[0];
    let (min, max, n) = micros_min_max(&lake, Dataset::Swaps);
    assert_eq!(n, 100, "one page of the busiest token");
    assert_eq!(stream.target, format!("token={token}"));
    assert!(stream.interrupted);
    assert_eq!(stream.rows, Some(100));
    assert_eq!((stream.first, stream.last), (Some(at(min)), Some(at(max))));
    assert_eq!(stream.fetched.len(), 1, "{stream:#?}");
    assert_eq!(stream.fetched[0].from, Some(at(min + 1)));
    // The run starts at the service's time of its first answer (its `Date`, in whole
    // seconds), whatever this machine's clock says.
    let run_start = stream.fetched[0].to.unwrap();
    assert_eq!(
        run_start,
        now.duration_trunc(TimeDelta::seconds(1)).unwrap()
    );
    assert_eq!(
        (swaps.rows, swaps.first, swaps.last),
        (100, Some(at(min)), Some(at(max)))
    );

    // Trades of the wallet, complete: everything back to its first trade.
    let trades = of(Dataset::Trades);
    let (tmin, tmax, tn) = micros_min_max(&lake, Dataset::Trades);
    let stream = &trades.targets[0];
    assert_eq!(stream.target, format!("wallet={wallet}"));
    assert!(!stream.interrupted);
    assert_eq!(stream.rows, Some(tn as u64));
    assert_eq!(
        (stream.first, stream.last),
        (Some(at(tmin)), Some(at(tmax)))
    );
    assert_eq!(stream.fetched.len(), 1);
    assert_eq!(stream.fetched[0].from, None);

    // Files and bytes are the manifest's.
    let manifest = lake.manifest().unwrap();
    for d in &status.datasets {
        let files: Vec<_> = manifest.files_of(d.dataset).collect();
        assert_eq!(d.files, files.len() as u64);
        assert_eq!(d.bytes, files.iter().map(|(_, e)| e.bytes).sum::<u64>());
    }

    // The resumed stream completes: everything back to its first record, counted once.
    sync(&sim, &lake, &[swaps_of(&token)]).await;
    let status = coverage::status(&lake).unwrap();
    let stream = &status
        .datasets
        .iter()
        .find(|s| s.dataset == Dataset::Swaps)
        .unwrap()
        .targets[0];
    let (min, _, n) = micros_min_max(&lake, Dataset::Swaps);
    assert!(n > 100);
    assert!(!stream.interrupted);
    assert_eq!(stream.rows, Some(n as u64));
    assert_eq!(stream.first, Some(at(min)));
    assert_eq!(
        stream.fetched,
        vec![TimeRange {
            from: None,
            to: Some(run_start)
        }]
    );

    // Status reads no data file: the same answer with every data file gone.
    let lake_arg = dir.path().to_str().unwrap();
    let before = common::dexlake_cli(&["status", "--format", "json", "--lake", lake_arg]);
    assert!(remove_data_files(dir.path()) > 0);
    let fresh = Lake::open_existing(dir.path()).unwrap();
    assert_eq!(coverage::status(&fresh).unwrap(), status);
    let after = common::dexlake_cli(&["status", "--format", "json", "--lake", lake_arg]);
    assert_eq!(before, after);
    let table = common::dexlake_cli(&["status", "--lake", lake_arg]);
    assert!(
        table.contains(&format!("token={token} interval=300")),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bars_over_a_range_never_fetched_are_missing_and_never_filled() {
    // Ten-second bars: the newest page of the busiest token spans minutes, not hours.
    const WIDTH: i64 = 10;
    let sim = common::tiny_sim(12).await;
    let (token, _) = busiest_token(&sim);
    // A wallet that swapped the token long before its newest page: from a full sync.
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = Arc::new(Lake::open(scratch_dir.path()).unwrap());
    sync(&sim, &scratch, &[swaps_of(&token)]).await;
    let oldest = scratch
        .scan(Dataset::Swaps)
        .unwrap()
        .sort(["block_time"], SortMultipleOptions::default())
        .select([col("wallet_address")])
        .first()
        .collect()
        .unwrap();
    let wallet = oldest
        .column("wallet_address")
        .unwrap()
        .str()
        .unwrap()
        .get(0)
        .unwrap()
        .to_owned();

    // The wallet's swaps in full; the token's stream interrupted after its newest page.
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    sync(
        &sim,
        &lake,
        &[Job::Swaps {
            token: None,
            wallet: Some(wallet.clone()),
            pool: None,
        }],
    )
    .await;
    sync_interrupted(&sim, &lake, swaps_of(&token)).await;
    let hole_end = coverage::status(&lake)
        .unwrap()
        .datasets
        .iter()
        .find(|d| d.dataset == Dataset::Swaps)
        .unwrap()
        .targets
        .iter()
        .find(|t| t.target == format!("token={token}"))
        .unwrap()
        .fetched[0]
        .from
        .unwrap();

    for fill in [Fill::Skip, Fill::Null, Fill::ForwardFill] {
        let covered = lake
            .query()
            .token(&token)
            .bars_covered(Bars::every(WIDTH).fill(fill))
            .unwrap();
        let missing = &covered.coverage.targets[0].missing;
        assert_eq!(
            missing,
            &vec![TimeRange {
                from: None,
                to: Some(hole_end)
            }]
        );
        assert!(!covered.coverage.is_complete());
        // Without the coverage, the wallet's swaps make bars inside the hole.
        let blind = dexlake::analytics::bars(
            &lake,
            EventSource::Swaps,
            &Selection::Token(token.clone()),
            TimeRange::default(),
            &BarOptions {
                fill,
                ..BarOptions::with_width(WIDTH)
            },
        )
        .unwrap();
        let ts = |df: &DataFrame| -> Vec<i64> {
            df.column("timestamp")
                .unwrap()
                .cast(&DataType::Int64)
                .unwrap()
                .i64()
                .unwrap()
                .into_no_null_iter()
                .collect()
        };
        let hole_us = hole_end.timestamp_micros();
        assert!(
            ts(&blind).iter().any(|&t| t + WIDTH * 1_000_000 <= hole_us),
            "the wallet's swaps lie in the hole"
        );
        // No bar meets the hole, filled or not.
        let bars = &covered.value;
        assert!(ts(bars).iter().all(|&t| t >= hole_us), "{fill:?}: {bars}");
        // After the hole, the bars are those the whole lake gives from the first bar with
        // events on: nothing was filled across the hole.
        let counts: Vec<i64> = bars
            .column("count")
            .unwrap()
            .i64()
            .unwrap()
            .into_no_null_iter()
            .collect();
        assert!(
            counts[0] > 0,
            "{fill:?}: the first bar after the hole has events"
        );
        let first = ts(bars)[0];
        let after = blind
            .clone()
            .lazy()
            .filter(col("timestamp").cast(DataType::Int64).gt_eq(lit(first)))
            .collect()
            .unwrap();
        assert!(after.equals_missing(bars), "{fill:?}: {after} vs {bars}");
        if fill != Fill::Skip {
            assert!(
                counts.contains(&0),
                "{fill:?}: empty buckets after the hole are filled"
            );
        }
    }

    // The CLI warns, naming the range; --strict refuses and prints nothing.
    let lake_arg = dir.path().to_str().unwrap();
    let args = [
        "ohlcv",
        "--token",
        &token,
        "--interval",
        "10",
        "--fill",
        "ffill",
        "--lake",
        lake_arg,
    ];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let hole = TimeRange {
        from: None,
        to: Some(hole_end),
    }
    .to_string();
    assert!(err.contains("warning:") && err.contains(&hole), "{err}");
    let strict = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .arg("--strict")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&strict.stderr);
    assert_eq!(strict.status.code(), Some(4), "{err}");
    assert!(strict.stdout.is_empty());
    assert!(err.contains("--strict") && err.contains(&hole), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pnl_flags_a_wallet_synced_by_token_only_and_bars_name_a_wallets_view() {
    let sim = common::tiny_sim(13).await;
    let (token, _) = busiest_token(&sim);
    let client = common::sim_client(&sim);
    let page = client
        .trades(&dexlake::api::requests::TradesRequest {
            token: Some(token.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let wallet = page.data[0].wallet_address.clone();

    // The token's trades only: the wallet's PnL is partial.
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    sync(
        &sim,
        &lake,
        &[Job::Trades {
            token: Some(token.clone()),
            wallet: None,
        }],
    )
    .await;
    let pnl = lake
        .query()
        .wallet(&wallet)
        .pnl_report_covered(&PnlConfig::default())
        .unwrap();
    assert!(pnl.value.ledgers.height() > 0);
    let target = &pnl.coverage.targets[0];
    assert_eq!(target.target, format!("wallet={wallet}"));
    let partial = target.partial.as_deref().expect("the PnL is partial");
    assert!(
        partial.contains(&token) && partial.contains("partial"),
        "{partial}"
    );
    assert!(!pnl.coverage.is_complete());
    // Of the token alone, the token's stream covers the wallet's trades.
    let one = lake
        .query()
        .wallet(&wallet)
        .token(&token)
        .pnl_report_covered(&PnlConfig::default())
        .unwrap();
    assert!(one.coverage.is_complete(), "{:?}", one.coverage);

    let lake_arg = dir.path().to_str().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["pnl", "--wallet", &wallet, "--lake", lake_arg])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("partial"), "{err}");
    let strict = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["pnl", "--wallet", &wallet, "--strict", "--lake", lake_arg])
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(4));
    assert!(strict.stdout.is_empty());

    // The wallet synced by wallet: its PnL is complete, and the token's trade bars say that
    // the lake holds only the wallet's view of the token.
    let dir = tempfile::tempdir().unwrap();
    let lake_arg = dir.path().to_str().unwrap();
    common::dexlake_cli(&[
        "sync",
        "trades",
        "--wallet",
        &wallet,
        "--lake",
        lake_arg,
        "--base-url",
        sim.base_url(),
        "--api-key",
        "demo-key",
    ]);
    let lake = Lake::open_existing(dir.path()).unwrap();
    let pnl = lake
        .query()
        .wallet(&wallet)
        .pnl_report_covered(&PnlConfig::default())
        .unwrap();
    assert!(pnl.coverage.is_complete(), "{:?}", pnl.coverage);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args([
            "ohlcv",
            "--source",
            "trades",
            "--token",
            &token,
            "--interval",
            "3600",
            "--lake",
            lake_arg,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!out.stdout.is_empty());
    assert!(
        err.contains(&format!("wallet={wallet}")) && err.contains("partial view"),
        "{err}"
    );
    let strict = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args([
            "ohlcv",
            "--source",
            "trades",
            "--token",
            &token,
            "--interval",
            "3600",
            "--strict",
            "--lake",
            lake_arg,
        ])
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(4));
    assert!(strict.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coverage_ends_at_the_services_time_not_this_machines_clock() {
    // A live service whose clock (2025-06-01) is far behind this machine's.
    let sim = common::manual_live_sim(21).await;
    let (token, _) = busiest_token(&sim);
    let service_now = sim.now();
    let day = TimeDelta::days(1);
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    sync(
        &sim,
        &lake,
        &[
            swaps_of(&token),
            // An open candle range, and one whose end is after the service's time.
            Job::Candles {
                token: Some(token.clone()),
                pool: None,
                interval: 3600,
                from: service_now - day,
                to: None,
            },
            Job::Candles {
                token: Some(token.clone()),
                pool: None,
                interval: 300,
                from: service_now - day,
                to: Some(service_now + day),
            },
        ],
    )
    .await;
    let status = coverage::status(&lake).unwrap();
    let mut ends = 0;
    for target in status.datasets.iter().flat_map(|d| &d.targets) {
        let end = target
            .fetched
            .last()
            .and_then(|s| s.to)
            .expect("a fetched range");
        assert!(
            end <= service_now,
            "{}: fetched up to {end}, after the service's time {service_now}",
            target.target
        );
        ends += 1;
    }
    assert_eq!(ends, 3);
    // The hours after the service's time were never fetched: a strict answer over them fails.
    let later = TimeRange {
        from: Some(service_now),
        to: Some(service_now + TimeDelta::hours(6)),
    };
    let cover = coverage::of_events(
        &lake,
        EventSource::Swaps,
        &Selection::Token(token.clone()),
        later,
    )
    .unwrap();
    assert!(!cover.is_complete(), "{cover:?}");
    // A later sync, once the service's clock moved on, covers them.
    sim.advance(6 * 3600).unwrap();
    sync(&sim, &lake, &[swaps_of(&token)]).await;
    let cover = coverage::of_events(
        &lake,
        EventSource::Swaps,
        &Selection::Token(token.clone()),
        later,
    )
    .unwrap();
    assert!(cover.is_complete(), "{cover:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_one_token_and_one_wallet_covers_exactly_that() {
    let sim = common::tiny_sim(13).await;
    let (token, _) = busiest_token(&sim);
    let client = common::sim_client(&sim);
    let page = client
        .trades(&dexlake::api::requests::TradesRequest {
            token: Some(token.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let wallet = page.data[0].wallet_address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    sync(
        &sim,
        &lake,
        &[Job::Trades {
            token: Some(token.clone()),
            wallet: Some(wallet.clone()),
        }],
    )
    .await;
    // Every wallet: the wallet's PnL from one token is partial.
    let all = coverage::of_wallets(&lake, None, None).unwrap();
    assert!(!all.is_complete(), "{all:?}");
    let target = all
        .targets
        .iter()
        .find(|t| t.target == format!("wallet={wallet}"))
        .expect("the wallet is named");
    assert!(
        target
            .partial
            .as_deref()
            .is_some_and(|p| p.contains(&token) && p.contains("partial")),
        "{target:?}"
    );
    // The wallet in that token: exactly what the stream fetched.
    let one =
        coverage::of_wallets(&lake, Some(std::slice::from_ref(&wallet)), Some(&token)).unwrap();
    assert!(one.is_complete(), "{one:?}");

    let lake_arg = dir.path().to_str().unwrap();
    let pnl = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .arg("pnl")
            .args(args)
            .args(["--strict", "--lake", lake_arg])
            .output()
            .unwrap()
    };
    for args in [&["--top", "5"][..], &["--all-wallets"][..]] {
        let out = pnl(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(err.contains(&wallet) && err.contains("partial"), "{err}");
    }
    let out = pnl(&["--wallet", &wallet, "--token", &token]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_is_covered_inside_its_syncs_and_strict_refuses_beyond_them() {
    let sim = common::tiny_sim(14).await;
    let (token, now) = busiest_token(&sim);
    let evm = sim.market().catalog().evm["1"].tokens[0].address.clone();
    let day = now.duration_trunc(TimeDelta::days(1)).unwrap();
    let d = |n: i64| day - TimeDelta::days(n);
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    // Hourly candles of two days with the day between them never synced; the hourly price
    // history of three days.
    let candles = |from, to| Job::Candles {
        token: Some(token.clone()),
        pool: None,
        interval: 3600,
        from,
        to: Some(to),
    };
    let history = Job::PriceHistory {
        chain_id: 1,
        tokens: vec![evm.clone()],
        pools: vec![],
        interval: 3600,
        from: d(3),
        to: Some(d(0)),
    };
    sync(
        &sim,
        &lake,
        &[candles(d(4), d(2)), history, candles(d(1), d(0))],
    )
    .await;
    let coverage_warnings = |a: &dexlake::query::Answer<DataFrame>| -> Vec<String> {
        a.warnings
            .iter()
            .filter(|w| w.kind == dexlake::query::WarningKind::Coverage)
            .map(|w| w.text.clone())
            .collect()
    };
    let span = |from: DateTime<Utc>, to: DateTime<Utc>| TimeRange {
        from: Some(from),
        to: Some(to),
    };

    // Inside what was synced: complete, no warning, and strict answers.
    let candle_bars = |from, to| {
        lake.query()
            .candles()
            .token(&token)
            .between(from, to)
            .bars_covered(Bars::every(3600).fill(Fill::ForwardFill))
            .unwrap()
    };
    for (from, to) in [
        (d(4), d(2)),
        (d(1), d(0)),
        (d(3), d(2) - TimeDelta::hours(5)),
    ] {
        let a = candle_bars(from, to);
        assert!(a.coverage.is_complete(), "{:?}", a.coverage);
        assert!(coverage_warnings(&a).is_empty(), "{:?}", a.warnings);
        assert_eq!(
            a.coverage.targets[0].target,
            format!("token={token} interval=3600")
        );
    }
    // No range: the series' synced span, whose hole is missing.
    let open = lake
        .query()
        .candles()
        .token(&token)
        .bars_covered(Bars::every(3600))
        .unwrap();
    assert_eq!(open.coverage.targets[0].missing, vec![span(d(2), d(1))]);
    // Across the hole: named in a warning, its buckets left out even forward-filled, and
    // refused when strict.
    let across = candle_bars(d(3), d(0));
    assert_eq!(across.coverage.targets[0].missing, vec![span(d(2), d(1))]);
    let warnings = coverage_warnings(&across);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&span(d(2), d(1)).to_string()) && warnings[0].contains(&token),
        "{warnings:?}"
    );
    let times: Vec<i64> = across
        .value
        .column("timestamp")
        .unwrap()
        .cast(&DataType::Int64)
        .unwrap()
        .i64()
        .unwrap()
        .into_no_null_iter()
        .collect();
    let (hole_from, hole_to) = (d(2).timestamp_micros(), d(1).timestamp_micros());
    assert!(times.iter().any(|&t| t < hole_from) && times.iter().any(|&t| t >= hole_to));
    assert!(
        times.iter().all(|&t| t < hole_from || t >= hole_to),
        "no bar inside the range never fetched"
    );
    let strict = lake
        .query()
        .candles()
        .token(&token)
        .between(d(3), d(0))
        .strict(true)
        .bars(Bars::every(3600));
    assert!(
        matches!(strict, Err(dexlake::Error::Incomplete { .. })),
        "{strict:?}"
    );

    // Price history: covered over its three days, not before them.
    let history_bars = |from| {
        lake.query()
            .price_history(1)
            .token(&evm)
            .between(from, d(0))
            .bars_covered(Bars::every(3600 * 6))
            .unwrap()
    };
    let inside = history_bars(d(3));
    assert!(inside.coverage.is_complete(), "{:?}", inside.coverage);
    assert!(
        coverage_warnings(&inside).is_empty(),
        "{:?}",
        inside.warnings
    );
    assert_eq!(
        inside.coverage.targets[0].target,
        format!("token={evm} chain_id=1 interval=3600")
    );
    let before = history_bars(d(5));
    assert_eq!(before.coverage.targets[0].missing, vec![span(d(5), d(3))]);
    assert_eq!(coverage_warnings(&before).len(), 1, "{:?}", before.warnings);
    // The coverage of the query, without bars, reads the same syncs.
    let asked = lake
        .query()
        .price_history(1)
        .token(&evm)
        .between(d(5), d(0))
        .coverage()
        .unwrap();
    assert_eq!(asked.targets[0].missing, vec![span(d(5), d(3))]);
    // Another interval was never synced: its coverage is unknown.
    let other = lake
        .query()
        .price_history(1)
        .token(&evm)
        .series_interval(60)
        .coverage()
        .unwrap();
    assert!(
        !other.is_complete() && !other.targets[0].recorded,
        "{other:?}"
    );

    // The CLI: no warning inside, a warning beyond; --strict exits 4 beyond only.
    let root = dir.path().to_str().unwrap();
    let ohlcv = |source: &[&str], from: DateTime<Utc>, strict: bool| {
        let (from, to) = (from.timestamp().to_string(), d(0).timestamp().to_string());
        let mut args = vec!["ohlcv", "--lake", root, "--interval", "3600"];
        args.extend_from_slice(source);
        args.extend_from_slice(&["--from", &from, "--to", &to]);
        if strict {
            args.push("--strict");
        }
        std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .args(&args)
            .output()
            .unwrap()
    };
    let candles_of = ["--source", "candles", "--token", &token];
    let history_of = [
        "--source",
        "price-history",
        "--chain-id",
        "1",
        "--token",
        &evm,
    ];
    for (source, inside, beyond, hole) in [
        (&candles_of[..], d(1), d(3), span(d(2), d(1))),
        (&history_of[..], d(3), d(5), span(d(5), d(3))),
    ] {
        for strict in [false, true] {
            let out = ohlcv(source, inside, strict);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            assert!(!out.stdout.is_empty());
            assert!(!err.contains("warning:"), "{source:?}: {err}");
        }
        let out = ohlcv(source, beyond, false);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains("warning:") && err.contains(&hole.to_string()),
            "{source:?}: {err}"
        );
        let out = ohlcv(source, beyond, true);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{err}");
        assert!(out.stdout.is_empty());
        assert!(
            err.contains("--strict") && err.contains(&hole.to_string()),
            "{err}"
        );
    }

    // The series synced from the simulator hold no gap and no price jump.
    let report = dexlake::analytics::quality::check(
        &lake,
        &dexlake::analytics::quality::CheckOptions {
            history_fetched: coverage::check_ranges(&lake).unwrap().price_history,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        (report.series.price_histories, report.series.candle_series),
        (1, 1),
        "{:?}",
        report.series
    );
    assert!(report.is_clean(), "{:#?}", report.findings);
}
