//! The cost of one `dexlake follow` poll on a small and on a large lake, and how long after a
//! bar's end it is printed.
//!
//! ```sh
//! cargo bench --bench follow_poll -- [--big-lake target/verify-lake] [--polls 40]
//! ```
//!
//! The simulator runs as its own process (`dexlake sim --live --speed 600 --scale small`), so
//! the CPU time measured (`getrusage` of this process around each poll and its commit) is the
//! follower's alone. Two followers of the market's two most active tokens, 1-minute bars,
//! polling every 200 ms:
//!
//! - on a new lake (the tokens' history, about ten thousand swaps, is its first poll's sync);
//! - on a hard-linked copy of `--big-lake` (the 10M-swap lake of `dexlake bench-lake`), the
//!   same tokens synced into it first.
//!
//! A poll's cost should follow what is new, not the lake's size. The latency of a bar is the
//! real time from the simulator's clock passing the bar's end to the end of the poll that
//! printed it (the clock maps to real time from the `now` of `GET /sim/catalog` at start).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dexlake::api::{Client, ClientConfig};
use dexlake::lake::Lake;
use dexlake::live::{FollowConfig, Follower};
use dexlake::sync::CancelToken;
use polars::prelude::*;

const SPEED: f64 = 600.0;

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given; RUSAGE_SELF is always valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Copies a lake as hard links (its files are never changed in place), so following into the
/// copy leaves the original as it was.
fn link_copy(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-al")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(ok.success(), "copying {} failed", from.display());
}

struct Measured {
    cpu_ms: Vec<f64>,
    latency_ms: Vec<f64>,
    new_swaps: usize,
}

async fn follow(
    base: &str,
    root: &Path,
    tokens: &[String],
    polls: usize,
    clock: (Instant, i64),
) -> Measured {
    let client = Client::new(ClientConfig {
        base_url: base.to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })
    .unwrap();
    let lake = Arc::new(Lake::open(root).unwrap());
    let mut follower = Follower::new(
        client,
        lake,
        FollowConfig {
            tokens: tokens.to_vec(),
            interval_seconds: 60,
            ..FollowConfig::default()
        },
    )
    .unwrap();
    let cancel = CancelToken::new();
    // The first poll syncs the tokens' history: not measured.
    let first = follower.poll(&cancel).await.unwrap();
    follower.commit(&first.closed).unwrap();
    let mut m = Measured {
        cpu_ms: Vec::new(),
        latency_ms: Vec::new(),
        new_swaps: 0,
    };
    for _ in 0..polls {
        let started = Instant::now();
        let cpu = cpu_seconds();
        let poll = follower.poll(&cancel).await.unwrap();
        follower.commit(&poll.closed).unwrap();
        m.cpu_ms.push((cpu_seconds() - cpu) * 1e3);
        let printed = Instant::now();
        m.new_swaps += poll.new_events;
        let ends = poll
            .closed
            .column("timestamp")
            .unwrap()
            .cast(&DataType::Int64)
            .unwrap();
        for label in ends.i64().unwrap().into_no_null_iter() {
            let end = label + 60_000_000;
            let real_end =
                clock.0 + Duration::from_secs_f64(((end - clock.1) as f64 / 1e6 / SPEED).max(0.0));
            m.latency_ms
                .push(printed.saturating_duration_since(real_end).as_secs_f64() * 1e3);
        }
        tokio::time::sleep_until((started + Duration::from_millis(200)).into()).await;
    }
    m
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let big = PathBuf::from(arg("--big-lake").unwrap_or_else(|| "target/verify-lake".into()));
    let polls: usize = arg("--polls").and_then(|p| p.parse().ok()).unwrap_or(40);
    assert!(
        big.join("_dexlake").exists(),
        "no lake at {} (dexlake bench-lake {} --scale large)",
        big.display(),
        big.display()
    );

    let mut sim = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args([
            "sim",
            "--live",
            "--speed",
            &SPEED.to_string(),
            "--seed",
            "7",
            "--scale",
            "small",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("dexlake sim starts");
    let mut first = String::new();
    std::io::BufReader::new(sim.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let base = first
        .trim()
        .strip_prefix("listening on ")
        .expect("the sim's address")
        .to_owned();
    let catalog: serde_json::Value = reqwest::Client::new()
        .get(format!("{base}/sim/catalog"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let now: chrono::DateTime<chrono::Utc> = catalog["now"].as_str().unwrap().parse().unwrap();
    let clock = (Instant::now(), now.timestamp_micros());
    let tokens: Vec<String> = catalog["altchain"]["tokens"].as_array().unwrap()[..2]
        .iter()
        .map(|t| t["address"].as_str().unwrap().to_owned())
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    let large = dir.path().join("large");
    link_copy(&big, &large);
    let big_rows = Lake::open_existing(&large)
        .unwrap()
        .row_count(dexlake::lake::Dataset::Swaps)
        .unwrap();
    let a = follow(&base, &small, &tokens, polls, clock).await;
    let small_rows = Lake::open_existing(&small)
        .unwrap()
        .row_count(dexlake::lake::Dataset::Swaps)
        .unwrap();
    let b = follow(&base, &large, &tokens, polls, clock).await;
    let _ = sim.kill();
    let _ = sim.wait();

    println!(
        "| lake | swaps | polls | new swaps | CPU per poll, median | p90 | bar end to printed, median | max |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, rows, m) in [("new", small_rows, &a), ("large", big_rows, &b)] {
        let mut sorted = m.cpu_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let p90 = sorted[(sorted.len() * 9 / 10).min(sorted.len() - 1)];
        let max = m.latency_ms.iter().copied().fold(0.0, f64::max);
        println!(
            "| {name} | {rows} | {polls} | {} | {:.1} ms | {:.1} ms | {:.0} ms | {:.0} ms |",
            m.new_swaps,
            median(m.cpu_ms.clone()),
            p90,
            median(m.latency_ms.clone()),
            max
        );
    }
    println!(
        "CPU per poll, large / new: {:.2}",
        median(b.cpu_ms) / median(a.cpu_ms)
    );
}
