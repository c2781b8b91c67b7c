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
