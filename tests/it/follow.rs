//! `dexlake follow` and the library's `Follower`: bars closed by the watermark are printed and
//! stored once, equal to the batch bars of the lake's swaps over the same span, and a restart
//! resumes without a gap or a repeat.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use dexlake::analytics::{BarOptions, EventSource, Selection, TimeRange, bars};
use dexlake::lake::{Dataset, Lake};
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
