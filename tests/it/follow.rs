//! `dexlake follow` and the library's `Follower`: bars closed by the watermark are printed and
//! stored once, equal to the batch bars of the lake's swaps over the same span, and a restart
//! resumes without a gap or a repeat.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use dexlake::analytics::{BarOptions, EventSource, Selection, TimeRange, bars};
use dexlake::lake::sample::Samples;
use dexlake::lake::{Dataset, Lake, convert};
use dexlake::live::{FollowConfig, Follower};
use dexlake::sync::CancelToken;
use polars::prelude::*;

use crate::common::{dexlake_cli, sim_client, tiny_sim};

fn since() -> DateTime<Utc> {
    "2025-05-25T00:00:00Z".parse().unwrap()
}

/// The batch bars of `token`'s swaps in the lake from `since`, all closed by `watermark`.
fn batch_bars(lake: &Lake, token: &str, interval: i64, watermark: DateTime<Utc>) -> DataFrame {
    let options = BarOptions {
        data_end: Some(watermark),
        ..BarOptions::with_width(interval)
    };
    let range = TimeRange {
        from: Some(since()),
        to: Some(watermark),
    };
    bars(
        lake,
        EventSource::Swaps,
        &Selection::Tokens(vec![token.to_owned()]),
        range,
        &options,
    )
    .unwrap()
}

/// On a market that stopped trading, the first poll closes every bar since `since` (the
/// service's clock is past them all), the bars are stored, and a follower started again on the
/// same lake resumes: it closes nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_closes_each_bar_once_and_resumes_where_it_stopped() {
    let sim = tiny_sim(7).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = FollowConfig {
        tokens: vec![token.clone()],
        interval_seconds: 3_600,
        since: Some(since()),
        ..FollowConfig::default()
    };
    let cancel = CancelToken::new();
    let mut follower = Follower::new(sim_client(&sim), Arc::clone(&lake), config.clone()).unwrap();
    assert!(follower.watermark().is_none());
    let poll = follower.poll(&cancel).await.unwrap();
    assert!(poll.advanced && poll.new_events > 0, "{poll:?}");
    let watermark = follower.watermark().unwrap();
    follower.commit(&poll.closed).unwrap();

    let expected = batch_bars(&lake, &token, 3_600, watermark);
    assert!(expected.height() > 20, "{expected}");
    assert!(
        poll.closed.equals_missing(&expected),
        "{}\n{expected}",
        poll.closed
    );
    // Stored as the lake's `bars` dataset, with the interval from the path.
    let stored = lake
        .scan(Dataset::Bars)
        .unwrap()
        .sort(["timestamp"], SortMultipleOptions::default())
        .collect()
        .unwrap();
    assert_eq!(stored.height(), expected.height());
    assert!(
        stored
            .column("interval")
            .unwrap()
            .i64()
            .unwrap()
            .into_no_null_iter()
            .all(|i| i == 3_600)
    );
    assert_eq!(
        stored.column("close").unwrap().as_materialized_series(),
        expected.column("close").unwrap().as_materialized_series()
    );

    // A second poll and a new follower on the same lake add nothing.
    let again = follower.poll(&cancel).await.unwrap();
    assert_eq!(again.closed.height(), 0);
    follower.commit(&again.closed).unwrap();
    drop(follower);
    let mut resumed = Follower::new(sim_client(&sim), Arc::clone(&lake), config).unwrap();
    assert!(resumed.watermark().is_some_and(|w| w >= watermark));
    let poll = resumed.poll(&cancel).await.unwrap();
    assert_eq!(poll.closed.height(), 0, "{}", poll.closed);
    assert_eq!(poll.new_events, 0);
    sim.shutdown().await;
}

/// `dexlake follow` prints each closed bar once as a JSON line with `ohlcv --format json`'s
/// columns, and a restarted follow prints nothing already printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_json_lines_once_across_restarts() {
    let sim = tiny_sim(7).await;
    let token = sim.market().catalog().altchain.tokens[1].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let base = sim.base_url().to_owned();
    let run = {
        let (root, base, token) = (root.clone(), base.clone(), token.clone());
        move || {
            dexlake_cli(&[
                "--lake",
                &root,
                "--base-url",
                &base,
                "--api-key",
                "demo-key",
                "follow",
                "--token",
                &token,
                "--interval",
                "3600",
                "--since",
                "2025-05-25T00:00:00Z",
                "--polls",
                "1",
            ])
        }
    };
    let first = tokio::task::spawn_blocking(run.clone()).await.unwrap();
    let lines: Vec<serde_json::Value> = first
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() > 20, "{first}");
    let ohlcv = dexlake_cli(&[
        "--lake",
        &root,
        "ohlcv",
        "--tokens",
        &token,
        "--interval",
        "3600",
        "--from",
        "2025-05-25T00:00:00Z",
        "--format",
        "json",
    ]);
    let ohlcv: Vec<serde_json::Value> = serde_json::from_str(&ohlcv).unwrap();
    // The same keys and, but for the batch's open last bar (the follow's watermark is the
    // service's clock, past every swap of this finished market), the same values.
    assert_eq!(
        lines[0].as_object().unwrap().keys().collect::<Vec<_>>(),
        ohlcv[0].as_object().unwrap().keys().collect::<Vec<_>>()
    );
    assert_eq!(lines.len(), ohlcv.len());
    assert_eq!(lines[..lines.len() - 1], ohlcv[..ohlcv.len() - 1]);
    let second = tokio::task::spawn_blocking(run).await.unwrap();
    assert_eq!(second, "", "a restarted follow printed bars again");
    sim.shutdown().await;
}

/// One run of `dexlake follow` as a child, its JSON lines read as they come.
struct FollowRun {
    child: tokio::process::Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>,
}

fn start_follow(root: &str, base: &str, tokens: &str) -> FollowRun {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args([
            "--lake",
            root,
            "--base-url",
            base,
            "--api-key",
            "demo-key",
            "follow",
            "--tokens",
            tokens,
            "--interval",
            "60",
            "--poll",
            "0.2",
            "--format",
            "jsonl",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("dexlake follow starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(serde_json::from_str(&line).expect("a JSON line"));
        }
    });
    FollowRun { child, lines }
}

impl FollowRun {
    /// Waits (up to a minute, whatever the machine's load) until the run has printed `n` bars,
    /// then sends it `signal` and returns every bar it printed, with its exit status.
    async fn stop_after(
        mut self,
        n: usize,
        signal: &str,
    ) -> (Vec<serde_json::Value>, std::process::ExitStatus) {
        let mut printed = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while printed.len() < n {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(bar)) => printed.push(bar),
                Ok(None) => panic!("follow ended before printing {n} bars"),
                Err(_) => panic!("follow printed {} bars in a minute, not {n}", printed.len()),
            }
        }
        let pid = self.child.id().expect("running").to_string();
        let sent = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("follow exits")
            .unwrap();
        while let Some(bar) = self.lines.recv().await {
            printed.push(bar);
        }
        (printed, status)
    }
}

/// `(token, timestamp)` of a printed bar.
fn bar_key(bar: &serde_json::Value) -> (String, String) {
    (
        bar["token_address"].as_str().unwrap().to_owned(),
        bar["timestamp"].as_str().unwrap().to_owned(),
    )
}

/// Against a market that keeps trading (600 simulated seconds a second), `follow` is stopped
/// with Ctrl-C, restarted, killed, and restarted again: every bar printed is printed once but
/// for those of the poll in flight at the kill (printed again with the same values), the
/// printed bars have no gap and equal `dexlake ohlcv` over the final lake, and the lake holds
/// exactly the service's swaps of the followed tokens before the last watermark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_through_ctrl_c_and_a_kill_prints_every_bar_once_and_equal_to_ohlcv() {
    use dexlake::sim::{LiveConfig, Scale, SimConfig, Simulator};
    let sim = Simulator::start(SimConfig {
        seed: 7,
        scale: Scale::Small,
        live: Some(LiveConfig {
            speed: 600.0,
            ..LiveConfig::default()
        }),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let catalog = sim.market().catalog();
    let tokens: Vec<String> = catalog.altchain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let joined = tokens.join(",");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let base = sim.base_url().to_owned();

    let mut printed: Vec<Vec<serde_json::Value>> = Vec::new();
    // Ctrl-C once a few bars are out, then a restart that is killed, then a restart stopped
    // by Ctrl-C.
    for signal in ["-INT", "-KILL", "-INT"] {
        let run = start_follow(&root, &base, &joined);
        let (bars, status) = run.stop_after(3, signal).await;
        if signal == "-INT" {
            assert_eq!(status.code(), Some(130), "Ctrl-C exits with 130");
        }
        printed.push(bars);
    }

    // Printed once, except what the killed run printed in its last poll (same values).
    let mut seen: std::collections::BTreeMap<(String, String), serde_json::Value> =
        Default::default();
    let mut repeats = Vec::new();
    for (run, bars) in printed.iter().enumerate() {
        for bar in bars {
            if let Some(before) = seen.insert(bar_key(bar), bar.clone()) {
                assert_eq!(&before, bar, "a bar printed twice with other values");
                repeats.push((run, bar_key(bar)));
            }
        }
    }
    assert!(
        repeats.iter().all(|(run, _)| *run == 2),
        "only the run after the kill repeats bars: {repeats:?}"
    );

    // The printed bars are `ohlcv`'s over the final lake, without a gap, up to the watermark.
    let lake = Lake::open(dir.path()).unwrap();
    let key = format!("follow/bars/60/tokens={joined}");
    let state = lake.state(&key).unwrap().expect("the follow's state");
    let watermark = DateTime::from_timestamp_micros(state["watermark"].as_i64().unwrap()).unwrap();
    let start = DateTime::from_timestamp_micros(state["start"].as_i64().unwrap()).unwrap();
    let batch = dexlake_cli(&[
        "--lake",
        &root,
        "ohlcv",
        "--tokens",
        &joined,
        "--interval",
        "60",
        "--from",
        &start.to_rfc3339(),
        "--to",
        &watermark.to_rfc3339(),
        "--format",
        "json",
    ]);
    let batch: Vec<serde_json::Value> = serde_json::from_str(&batch).unwrap();
    // The batch's `incomplete` flags its last bar by the latest swap, not by the watermark:
    // the bars compared are those whose minute ended by the watermark, flag aside.
    let without_flag = |b: &serde_json::Value| {
        let mut b = b.clone();
        b.as_object_mut().unwrap().remove("incomplete");
        b
    };
    let closed: Vec<serde_json::Value> = batch
        .iter()
        .filter(|b| {
            let t: DateTime<Utc> = b["timestamp"].as_str().unwrap().parse().unwrap();
            t + chrono::Duration::seconds(60) <= watermark
        })
        .map(without_flag)
        .collect();
    assert!(closed.len() >= 6, "{} bars", closed.len());
    assert_eq!(
        seen.len(),
        closed.len(),
        "printed and batch bars differ in number"
    );
    for b in &closed {
        assert_eq!(without_flag(&seen[&bar_key(b)]), *b);
    }

    // The lake holds exactly the service's swaps of the tokens before the watermark.
    let check = tempfile::tempdir().unwrap();
    let reference = Arc::new(Lake::open(check.path()).unwrap());
    let syncer = dexlake::sync::Syncer::new(
        sim_client(&sim),
        Arc::clone(&reference),
        dexlake::sync::SyncConfig::default(),
    );
    let jobs: Vec<dexlake::sync::Job> = tokens
        .iter()
        .map(|t| dexlake::sync::Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        })
        .collect();
    assert!(!syncer.run(&jobs).await.any_failed());
    let ids =
        |lake: &Lake| -> Vec<i64> {
            let df =
                lake.scan(Dataset::Swaps)
                    .unwrap()
                    .filter(col("block_time").lt(lit(watermark.naive_utc()).cast(
                        DataType::Datetime(TimeUnit::Microseconds, Some(TimeZone::UTC)),
                    )))
                    .select([col("id")])
                    .sort(["id"], SortMultipleOptions::default())
                    .collect()
                    .unwrap();
            df.column("id")
                .unwrap()
                .i64()
                .unwrap()
                .into_no_null_iter()
                .collect()
        };
    assert_eq!(ids(&lake), ids(&reference));
    sim.shutdown().await;
}

/// Through injected 500s and 429s, polls that could not fetch everything leave the watermark
/// where it was, and the bars closed over the run are still the batch bars of the lake's swaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_injected_faults_the_watermark_waits_and_the_bars_stay_right() {
    use dexlake::sim::{LiveConfig, Scale, SimConfig, Simulator};
    let sim = Simulator::start(SimConfig {
        seed: 7,
        scale: Scale::Small,
        live: Some(LiveConfig {
            manual: true,
            ..LiveConfig::default()
        }),
        fail_rate: 0.3,
        throttle_rate: 0.02,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let tokens: Vec<String> = sim.market().catalog().altchain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = FollowConfig {
        tokens: tokens.clone(),
        interval_seconds: 60,
        ..FollowConfig::default()
    };
    // One retry: some polls end with a job failed.
    let client = crate::common::sim_client_retrying(&sim, 1);
    let mut follower = Follower::new(client, Arc::clone(&lake), config).unwrap();
    let cancel = CancelToken::new();
    let (mut stalled, mut advanced) = (0, 0);
    let mut printed: Option<DataFrame> = None;
    let closed = |printed: &Option<DataFrame>| printed.as_ref().map_or(0, DataFrame::height);
    // Which requests fail is random: at least 40 polls, and more (up to 200) until more than
    // 10 bars have closed.
    let mut polls = 0;
    while polls < 40 || (closed(&printed) <= 10 && polls < 200) {
        polls += 1;
        sim.advance(300).unwrap();
        let before = follower.watermark();
        let poll = follower.poll(&cancel).await.unwrap();
        if poll.advanced {
            advanced += 1;
        } else {
            stalled += 1;
            assert_eq!(
                follower.watermark(),
                before,
                "a stalled poll moved the watermark"
            );
            assert_eq!(poll.closed.height(), 0);
        }
        follower.commit(&poll.closed).unwrap();
        match printed.as_mut() {
            None => printed = Some(poll.closed),
            Some(all) => {
                all.vstack_mut(&poll.closed).unwrap();
            }
        }
    }
    assert!(
        stalled > 0 && advanced > 5,
        "{stalled} stalled, {advanced} advanced"
    );
    let watermark = follower.watermark().unwrap();
    let state = lake
        .state(&format!("follow/bars/60/tokens={}", tokens.join(",")))
        .unwrap()
        .unwrap();
    let start = DateTime::from_timestamp_micros(state["start"].as_i64().unwrap()).unwrap();
    let batch = bars(
        &lake,
        EventSource::Swaps,
        &Selection::Tokens(tokens),
        TimeRange {
            from: Some(start),
            to: Some(watermark),
        },
        &BarOptions {
            data_end: Some(watermark),
            ..BarOptions::with_width(60)
        },
    )
    .unwrap()
    .lazy()
    .filter(col("incomplete").not())
    .collect()
    .unwrap();
    let printed = printed
        .unwrap()
        .sort(
            ["token_address"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .unwrap();
    assert!(batch.height() > 10, "{batch}");
    assert!(printed.equals_missing(&batch), "{printed}\n{batch}");
    sim.shutdown().await;
}

/// The data files of `dataset` per partition folder.
fn files_per_partition(lake: &Lake, dataset: Dataset) -> BTreeMap<String, usize> {
    let mut per = BTreeMap::new();
    for (path, _) in lake.manifest().unwrap().files_of(dataset) {
        let folder = path.rsplit_once('/').map_or("", |(f, _)| f).to_owned();
        *per.entry(folder).or_insert(0) += 1;
    }
    per
}

/// Every `compact_every` commits a follower merges the files of the partitions it wrote (its
/// polls' swaps and its bars), and leaves the rest of the lake as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_compacts_the_partitions_it_wrote_and_no_other() {
    let sim = crate::common::manual_live_sim(7).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    // Small files the follow does not write: two snapshots of prices in one partition.
    let samples = Samples::generate(1, 1);
    for minute in 0..2 {
        let at = since() + TimeDelta::minutes(minute);
        let mut tx = lake.transaction().unwrap();
        tx.write(
            Dataset::Prices,
            convert::alt_prices_to_batch(&samples.alt_prices, at).unwrap(),
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let prices = files_per_partition(&lake, Dataset::Prices);
    assert_eq!(prices.values().copied().collect::<Vec<_>>(), vec![2]);

    const EVERY: u64 = 4;
    let config = FollowConfig {
        tokens: vec![token],
        interval_seconds: 3_600,
        since: Some(since()),
        compact_every: EVERY,
        ..FollowConfig::default()
    };
    let cancel = CancelToken::new();
    let mut follower = Follower::new(sim_client(&sim), Arc::clone(&lake), config).unwrap();
    let most = |lake: &Lake| {
        [Dataset::Swaps, Dataset::Bars]
            .into_iter()
            .flat_map(|d| files_per_partition(lake, d).into_values())
            .max()
            .unwrap_or(0)
    };
    for commit in 1..=EVERY {
        let poll = follower.poll(&cancel).await.unwrap();
        assert!(poll.advanced, "{poll:?}");
        if commit == EVERY {
            // The polls left several files in a partition the follow writes.
            assert!(
                most(&lake) >= 2,
                "{:?}",
                files_per_partition(&lake, Dataset::Swaps)
            );
        }
        follower.commit(&poll.closed).unwrap();
        sim.advance(2 * 3_600).unwrap();
    }
    // Merged: one file in each of its partitions; the prices' two files untouched.
    assert_eq!(most(&lake), 1);
    assert_eq!(files_per_partition(&lake, Dataset::Prices), prices);
    lake.verify().unwrap();
    sim.shutdown().await;
}

// ----- Hardening: what a restart, a hostile service and the user cannot break -----

use crate::common::proxy::{DateRule, Proxy};

/// The ids of the lake's swaps of `tokens` before `watermark`, sorted.
fn swap_ids_before(lake: &Lake, watermark: DateTime<Utc>) -> Vec<i64> {
    let df = lake
        .scan(Dataset::Swaps)
        .unwrap()
        .filter(
            col("block_time").lt(lit(watermark.naive_utc()).cast(DataType::Datetime(
                TimeUnit::Microseconds,
                Some(TimeZone::UTC),
            ))),
        )
        .select([col("id")])
        .sort(["id"], SortMultipleOptions::default())
        .collect()
        .unwrap();
    df.column("id")
        .unwrap()
        .i64()
        .unwrap()
        .into_no_null_iter()
        .collect()
}

/// The swaps of `tokens` the service holds, synced into a new lake.
async fn reference_lake(base: &str, tokens: &[String]) -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let client = dexlake::api::client::Client::new(dexlake::api::client::ClientConfig {
        base_url: base.to_owned(),
        api_key: Some("demo-key".into()),
        ..Default::default()
    })
    .unwrap();
    let syncer = dexlake::sync::Syncer::new(
        client,
        Arc::clone(&lake),
        dexlake::sync::SyncConfig::default(),
    );
    let jobs: Vec<dexlake::sync::Job> = tokens
        .iter()
        .map(|t| dexlake::sync::Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        })
        .collect();
    assert!(!syncer.run(&jobs).await.any_failed());
    drop(syncer);
    let lake = Arc::try_unwrap(lake).ok().unwrap();
    (dir, lake)
}

/// A client of a proxy in front of the simulator.
fn proxy_client(proxy: &Proxy) -> dexlake::api::client::Client {
    dexlake::api::client::Client::new(dexlake::api::client::ClientConfig {
        base_url: proxy.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..Default::default()
    })
    .unwrap()
}

/// A first poll interrupted while it pages the history (answers held 30 ms each) leaves its
/// stream unfinished; the market trades on; the restarted follower's poll finishes that stream
/// and then fetches the newest pages before it moves the watermark, so the lake holds every
/// swap before the watermark and the closed bars are the batch bars.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_poll_interrupted_and_restarted_loses_no_swap_before_the_watermark() {
    let sim = crate::common::manual_live_sim(7).await;
    let proxy = Proxy::start(sim.base_url()).await;
    proxy.set_delay(Duration::from_millis(30));
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = FollowConfig {
        tokens: vec![token.clone()],
        interval_seconds: 3_600,
        since: Some(since()),
        ..FollowConfig::default()
    };
    let mut follower =
        Follower::new(proxy_client(&proxy), Arc::clone(&lake), config.clone()).unwrap();
    // Cancelled once three pages have come: the stream records where to resume.
    let cancel = CancelToken::new();
    let canceller = {
        let (cancel, answers) = (cancel.clone(), proxy.answers());
        let hooks = Arc::new(proxy);
        let watching = Arc::clone(&hooks);
        let task = tokio::spawn(async move {
            while watching.answers() < answers + 3 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cancel.cancel();
        });
        (task, hooks)
    };
    let poll = follower.poll(&cancel).await.unwrap();
    canceller.0.await.unwrap();
    let proxy = canceller.1;
    assert!(!poll.advanced, "{poll:?}");
    follower.commit(&poll.closed).unwrap();
    drop(follower);

    // The market trades on; a new follower (a restart) polls.
    sim.advance(6 * 3_600).unwrap();
    let mut follower = Follower::new(proxy_client(&proxy), Arc::clone(&lake), config).unwrap();
    let poll = follower.poll(&CancelToken::new()).await.unwrap();
    assert!(poll.advanced, "{poll:?}");
    follower.commit(&poll.closed).unwrap();
    let watermark = follower.watermark().unwrap();

    let (_keep, reference) = reference_lake(sim.base_url(), std::slice::from_ref(&token)).await;
    let missing = swap_ids_before(&reference, watermark).len() as i64
        - swap_ids_before(&lake, watermark).len() as i64;
    assert_eq!(
        swap_ids_before(&lake, watermark),
        swap_ids_before(&reference, watermark),
        "{missing} swaps before the watermark are not in the lake"
    );
    let expected = batch_bars(&lake, &token, 3_600, watermark)
        .lazy()
        .filter(col("incomplete").not())
        .collect()
        .unwrap();
    assert!(expected.height() > 20, "{expected}");
    assert!(
        poll.closed.equals_missing(&expected),
        "{}\n{expected}",
        poll.closed
    );
    sim.shutdown().await;
}

/// Runs of `dexlake follow` against a fast live market behind a proxy that holds each answer
/// 30 ms, each stopped at a random instant of its catch-up polls by Ctrl-C or a kill: every
/// bar printed equals `dexlake ohlcv` over the final lake, none is missing up to the final
/// watermark, and the lake holds every swap of the tokens before it. 5 runs under `cargo
/// test`; `DEXLAKE_FOLLOW_CYCLES=50` for a long run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_kills_and_ctrl_c_in_catch_up_polls_lose_no_bar() {
    use dexlake::sim::{LiveConfig, Scale, SimConfig, Simulator};
    use rand::{Rng, SeedableRng};
    let cycles: usize = std::env::var("DEXLAKE_FOLLOW_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let sim = Simulator::start(SimConfig {
        seed: 7,
        scale: Scale::Small,
        live: Some(LiveConfig {
            speed: 20_000.0,
            ..LiveConfig::default()
        }),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let proxy = Proxy::start(sim.base_url()).await;
    proxy.set_delay(Duration::from_millis(30));
    let tokens: Vec<String> = sim.market().catalog().altchain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let joined = tokens.join(",");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let since = (sim.now() - TimeDelta::days(2)).to_rfc3339();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
        std::env::var("DEXLAKE_FOLLOW_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(36),
    );
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = [
            "--lake",
            &root,
            "--base-url",
            proxy.base_url(),
            "--api-key",
            "demo-key",
            "follow",
            "--tokens",
            &joined,
            "--interval",
            "3600",
            "--since",
            &since,
            "--poll",
            "0.2",
            "--format",
            "jsonl",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        tokio::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("dexlake follow starts")
    };
    let mut seen: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    let mut record = |stdout: &[u8], what: &str| {
        for line in String::from_utf8_lossy(stdout).lines() {
            let Ok(bar) = serde_json::from_str::<serde_json::Value>(line) else {
                // A kill can cut the last line short.
                continue;
            };
            if let Some(before) = seen.insert(bar_key(&bar), bar.clone()) {
                assert_eq!(before, bar, "{what}: a bar printed again with other values");
            }
        }
    };
    for cycle in 0..cycles {
        let child = run(&[]);
        let pid = child.id().unwrap().to_string();
        // Lands in the first polls: the catch-up of what traded while no follow ran.
        let wait = Duration::from_millis(rng.random_range(50..1_500));
        let signal = if rng.random_bool(0.5) {
            "-INT"
        } else {
            "-KILL"
        };
        tokio::time::sleep(wait).await;
        std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("follow exits")
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        if signal == "-INT" {
            // 130 after Ctrl-C; 0 when it came before the watcher was set up is not expected,
            // but a run that ended on its own would say why.
            assert!(
                out.status.code() == Some(130) || out.status.code().is_none(),
                "cycle {cycle}: {:?}: {err}",
                out.status
            );
        }
        record(
            &out.stdout,
            &format!("cycle {cycle} ({signal} after {wait:?})"),
        );
    }
    // A last run ends on its own after a few polls: its watermark is the final one.
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        run(&["--polls", "3"]).wait_with_output(),
    )
    .await
    .expect("the last follow exits")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    record(&out.stdout, "the last run");

    let lake = Lake::open(dir.path()).unwrap();
    let state = lake
        .state(&format!("follow/bars/3600/tokens={joined}"))
        .unwrap()
        .expect("the follow's state");
    let watermark = DateTime::from_timestamp_micros(state["watermark"].as_i64().unwrap()).unwrap();
    let start = DateTime::from_timestamp_micros(state["start"].as_i64().unwrap()).unwrap();
    let (_keep, reference) = reference_lake(sim.base_url(), &tokens).await;
    assert_eq!(
        swap_ids_before(&lake, watermark),
        swap_ids_before(&reference, watermark),
        "the lake lacks swaps before the watermark"
    );
    let batch = dexlake_cli(&[
        "--lake",
        &root,
        "ohlcv",
        "--tokens",
        &joined,
        "--interval",
        "3600",
        "--from",
        &start.to_rfc3339(),
        "--to",
        &watermark.to_rfc3339(),
        "--format",
        "json",
    ]);
    let batch: Vec<serde_json::Value> = serde_json::from_str(&batch).unwrap();
    let without_flag = |b: &serde_json::Value| {
        let mut b = b.clone();
        b.as_object_mut().unwrap().remove("incomplete");
        b
    };
    let closed: Vec<serde_json::Value> = batch
        .iter()
        .filter(|b| {
            let t: DateTime<Utc> = b["timestamp"].as_str().unwrap().parse().unwrap();
            t + chrono::Duration::seconds(3_600) <= watermark
        })
        .map(without_flag)
        .collect();
    assert!(closed.len() >= 48, "{} bars", closed.len());
    let missing: Vec<_> = closed
        .iter()
        .map(bar_key)
        .filter(|k| !seen.contains_key(k))
        .collect();
    assert!(missing.is_empty(), "bars never printed: {missing:?}");
    for b in &closed {
        assert_eq!(
            without_flag(&seen[&bar_key(b)]),
            *b,
            "a printed bar differs"
        );
    }
    assert_eq!(seen.len(), closed.len(), "bars printed past the watermark");
    sim.shutdown().await;
}

/// One answer dated 2100 neither moves the watermark nor closes a bar: the poll is held, and
/// the next poll, answered at the service's own time, goes on as if it had not happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_far_in_the_future_is_not_trusted() {
    let sim = crate::common::manual_live_sim(7).await;
    let proxy = Proxy::start(sim.base_url()).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = FollowConfig {
        tokens: vec![token.clone()],
        interval_seconds: 3_600,
        since: Some(since()),
        ..FollowConfig::default()
    };
    let cancel = CancelToken::new();
    let mut follower = Follower::new(proxy_client(&proxy), Arc::clone(&lake), config).unwrap();
    let first = follower.poll(&cancel).await.unwrap();
    assert!(first.advanced);
    follower.commit(&first.closed).unwrap();
    let watermark = follower.watermark().unwrap();

    sim.advance(600).unwrap();
    let far: DateTime<Utc> = "2100-01-01T00:00:00Z".parse().unwrap();
    proxy.set_date(DateRule::Set(far));
    let bad = follower.poll(&cancel).await.unwrap();
    assert!(!bad.advanced, "{bad:?}");
    assert_eq!(bad.closed.height(), 0, "{}", bad.closed);
    assert!(bad.held.as_deref().unwrap().contains("2100"), "{bad:?}");
    follower.commit(&bad.closed).unwrap();
    assert_eq!(follower.watermark(), Some(watermark));

    proxy.set_date(DateRule::Keep);
    sim.advance(3 * 3_600).unwrap();
    let next = follower.poll(&cancel).await.unwrap();
    assert!(next.advanced);
    assert_eq!(follower.watermark(), Some(sim.now()));
    follower.commit(&next.closed).unwrap();
    let stored = lake
        .state(&format!("follow/bars/3600/tokens={token}"))
        .unwrap()
        .unwrap();
    assert_eq!(
        stored["watermark"].as_i64().unwrap(),
        sim.now().timestamp_micros()
    );
    sim.shutdown().await;
}

/// A committed watermark can be taken back: `follow --reset` starts again at `--since`
/// instead of resuming at a watermark the service's bad clock put in 2100.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_reset_takes_back_a_committed_watermark() {
    let sim = tiny_sim(7).await;
    let proxy = Proxy::start(sim.base_url()).await;
    let token = sim.market().catalog().altchain.tokens[1].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    // A follow that trusted a Date of 2100 (as earlier versions did).
    {
        let lake = Arc::new(Lake::open(dir.path()).unwrap());
        let config = FollowConfig {
            tokens: vec![token.clone()],
            interval_seconds: 3_600,
            since: Some(since()),
            max_date_jump: Duration::from_secs(u64::MAX / 2),
            ..FollowConfig::default()
        };
        proxy.set_date(DateRule::Set("2100-01-01T00:00:00Z".parse().unwrap()));
        let mut follower = Follower::new(proxy_client(&proxy), lake, config).unwrap();
        let poll = follower.poll(&CancelToken::new()).await.unwrap();
        follower.commit(&poll.closed).unwrap();
        assert!(
            follower
                .watermark()
                .unwrap()
                .to_rfc3339()
                .starts_with("2100")
        );
    }
    proxy.set_date(DateRule::Keep);
    let follow = |reset: bool| {
        let (root, base, token) = (root.clone(), proxy.base_url().to_owned(), token.clone());
        move || {
            let mut args = vec![
                "--lake",
                &root,
                "--base-url",
                &base,
                "--api-key",
                "demo-key",
                "follow",
                "--token",
                &token,
                "--interval",
                "3600",
                "--since",
                "2025-05-25T00:00:00Z",
                "--polls",
                "1",
            ];
            if reset {
                args.push("--reset");
            }
            std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
                .args(&args)
                .output()
                .unwrap()
        }
    };
    let stuck = tokio::task::spawn_blocking(follow(false)).await.unwrap();
    assert!(String::from_utf8_lossy(&stuck.stderr).contains("resuming at 2100"));
    let reset = tokio::task::spawn_blocking(follow(true)).await.unwrap();
    assert!(
        reset.status.success(),
        "{}",
        String::from_utf8_lossy(&reset.stderr)
    );
    let lake = Lake::open(dir.path()).unwrap();
    let state = lake
        .state(&format!("follow/bars/3600/tokens={token}"))
        .unwrap()
        .unwrap();
    let watermark = DateTime::from_timestamp_micros(state["watermark"].as_i64().unwrap()).unwrap();
    assert_eq!(watermark, sim.now());
    let after = tokio::task::spawn_blocking(follow(false)).await.unwrap();
    assert!(
        String::from_utf8_lossy(&after.stderr)
            .contains(&format!("resuming at {}", sim.now().to_rfc3339())),
        "{}",
        String::from_utf8_lossy(&after.stderr)
    );
    sim.shutdown().await;
}

/// Runs `dexlake follow` of one token with `global` arguments before the command and `extra`
/// after it, bounded in time, and returns its output.
async fn follow_once(global: &[&str], token: &str, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = global.iter().map(|s| s.to_string()).collect();
    args.extend(
        [
            "follow",
            "--token",
            token,
            "--interval",
            "3600",
            "--poll",
            "0.1",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("follow ends")
        .unwrap()
}

/// A wrong API key and an address nothing listens on are permanent: follow stops at the
/// first poll with the error and a failure status, instead of retrying them and exiting 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_stops_on_a_permanent_error() {
    let sim = tiny_sim(7).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    for (base, key, needle) in [
        (sim.base_url(), "wrong-key", "401"),
        (closed.as_str(), "demo-key", "request to"),
    ] {
        let out = follow_once(
            &["--lake", &root, "--base-url", base, "--api-key", key],
            &token,
            &["--polls", "3"],
        )
        .await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{base} {key}: exited 0: {err}");
        assert!(err.contains(needle), "{needle:?} not in {err}");
        assert!(
            !err.contains("retrying"),
            "retried a permanent error: {err}"
        );
    }
    sim.shutdown().await;
}

/// Answers without a `Date` header: follow says so and fails, rather than "poll incomplete
/// (no answer)" forever and exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_a_date_are_named() {
    let sim = tiny_sim(7).await;
    let proxy = Proxy::start(sim.base_url()).await;
    proxy.set_date(DateRule::Drop);
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_owned();
    let out = follow_once(
        &[
            "--lake",
            &root,
            "--base-url",
            proxy.base_url(),
            "--api-key",
            "demo-key",
        ],
        &token,
        &["--polls", "3"],
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exited 0: {err}");
    assert!(err.contains("without a `Date` header"), "{err}");
    assert!(!err.contains("no answer"), "{err}");
    // A fault of the service, not of the command line: the service's exit status.
    assert_eq!(out.status.code(), Some(6), "{err}");
    sim.shutdown().await;
}

/// `--poll` must be a usable period and `--polls` at least one.
#[test]
fn follow_refuses_unusable_poll_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let base = [
        "--lake",
        root,
        "--base-url",
        "http://127.0.0.1:9",
        "follow",
        "--token",
        "T",
    ];
    for (extra, needle) in [
        (&["--poll", "1e-300"][..], "invalid --poll: must be 0.05 to"),
        (&["--poll", "0"][..], "invalid --poll"),
        (&["--poll=-1"][..], "invalid --poll"),
        (&["--poll", "NaN"][..], "invalid --poll"),
        (&["--poll", "inf"][..], "invalid --poll"),
        (&["--polls", "0"][..], "'--polls <POLLS>'"),
        (&["--lock-timeout=-1"][..], "--lock-timeout"),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        crate::common::dexlake_cli_refused(&args, needle);
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(base)
        .args(["--poll", "1e-300"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("got 1e-300") && err.len() < 300, "{err}");
}

/// Nothing to follow is refused by the library's check, as a usage error (the library's
/// message and exit status 2), before the lake is opened: no lake is created.
#[test]
fn follow_of_nothing_is_a_usage_error_and_creates_no_lake() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["--lake", root.to_str().unwrap()])
        .args(["--base-url", "http://127.0.0.1:9", "follow"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("invalid token: name the tokens (or the pool) to follow"),
        "{err}"
    );
    assert!(
        !root.exists(),
        "a refused follow created {}",
        root.display()
    );
}

/// A follow of T0, then of T0 and T1 (which stores T0's bars past the first follow's
/// watermark), then of T0 again resumes from its own state; and one whose stored bars file is
/// lost still starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_resumes_from_its_own_state_whatever_other_follows_stored() {
    let sim = crate::common::manual_live_sim(7).await;
    let catalog = sim.market().catalog();
    let (t0, t1) = (
        catalog.altchain.tokens[0].address.clone(),
        catalog.altchain.tokens[1].address.clone(),
    );
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let cancel = CancelToken::new();
    let config = |tokens: Vec<String>| FollowConfig {
        tokens,
        interval_seconds: 3_600,
        since: Some(since()),
        ..FollowConfig::default()
    };
    let mut printed: Vec<DataFrame> = Vec::new();
    let follow_once = |tokens: Vec<String>, keep: bool| {
        let lake = Arc::clone(&lake);
        let client = sim_client(&sim);
        let cancel = cancel.clone();
        let mut follower = Follower::new(client, lake, config(tokens)).unwrap();
        async move {
            let poll = follower.poll(&cancel).await.unwrap();
            assert!(poll.advanced, "{poll:?}");
            follower.commit(&poll.closed).unwrap();
            (keep, poll.closed)
        }
    };
    let (_, first) = follow_once(vec![t0.clone()], true).await;
    printed.push(first);
    sim.advance(5 * 3_600).unwrap();
    let _ = follow_once(vec![t0.clone(), t1.clone()], false).await;
    sim.advance(5 * 3_600).unwrap();
    let (_, again) = follow_once(vec![t0.clone()], true).await;
    printed.push(again);
    let lake_now = Lake::open(dir.path()).unwrap();
    let watermark = sim.now();
    let mut all = printed[0].clone();
    all.vstack_mut(&printed[1]).unwrap();
    let expected = batch_bars(&lake_now, &t0, 3_600, watermark)
        .lazy()
        .filter(col("incomplete").not())
        .collect()
        .unwrap();
    assert!(all.equals_missing(&expected), "{all}\n{expected}");

    // The bars files lost: the follow still starts, and polls.
    for (path, _) in lake_now.manifest().unwrap().files_of(Dataset::Bars) {
        std::fs::remove_file(dir.path().join(path)).unwrap();
    }
    sim.advance(3_600).unwrap();
    let mut follower = Follower::new(
        sim_client(&sim),
        Arc::clone(&lake),
        config(vec![t0.clone()]),
    )
    .unwrap();
    let poll = follower.poll(&cancel).await.unwrap();
    assert!(poll.advanced);
    sim.shutdown().await;
}

/// The bars' commit waits for another writer as long as `lock_timeout` says, instead of
/// failing after the lake's 10 seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bars_commit_waits_for_another_writer() {
    let sim = crate::common::manual_live_sim(7).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = FollowConfig {
        tokens: vec![token],
        interval_seconds: 3_600,
        since: Some(since()),
        lock_timeout: Duration::from_secs(120),
        ..FollowConfig::default()
    };
    let mut follower = Follower::new(sim_client(&sim), Arc::clone(&lake), config).unwrap();
    let poll = follower.poll(&CancelToken::new()).await.unwrap();
    assert!(poll.closed.height() > 0);
    // Another writer holds the lake for 12 seconds.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let root = dir.path().to_path_buf();
    let other = std::thread::spawn(move || {
        let other = Lake::open(&root).unwrap();
        let tx = other.transaction().unwrap();
        held_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(12));
        drop(tx);
    });
    held_rx.recv().unwrap();
    let committed = tokio::task::spawn_blocking(move || {
        let r = follower.commit(&poll.closed);
        (r, follower)
    })
    .await
    .unwrap();
    committed.0.expect("the commit waited for the other writer");
    other.join().unwrap();
    assert!(lake.row_count(Dataset::Bars).unwrap() > 0);
    sim.shutdown().await;
}

/// Swaps that reach the service after their bar closed (a `Date` 30 minutes ahead of what the
/// service had indexed) are counted as late, not silently left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swaps_arriving_for_a_closed_bar_are_counted_late() {
    let sim = crate::common::manual_live_sim(7).await;
    let proxy = Proxy::start(sim.base_url()).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = FollowConfig {
        tokens: vec![token],
        interval_seconds: 60,
        ..FollowConfig::default()
    };
    let cancel = CancelToken::new();
    let mut follower = Follower::new(proxy_client(&proxy), Arc::clone(&lake), config).unwrap();
    let poll = follower.poll(&cancel).await.unwrap();
    follower.commit(&poll.closed).unwrap();
    let mut late = 0;
    for _ in 0..6 {
        // The answer says it is 2 hours later than the swaps it holds.
        proxy.set_date(DateRule::Shift(2 * 3_600));
        let poll = follower.poll(&cancel).await.unwrap();
        assert!(poll.advanced, "{poll:?}");
        follower.commit(&poll.closed).unwrap();
        proxy.set_date(DateRule::Keep);
        sim.advance(2 * 3_600).unwrap();
        let poll = follower.poll(&cancel).await.unwrap();
        late += poll.late;
        follower.commit(&poll.closed).unwrap();
    }
    assert!(late > 0, "no swap counted late");
    assert_eq!(follower.late().values().sum::<u64>(), late);
    sim.shutdown().await;
}
