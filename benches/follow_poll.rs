//! The cost of one `dexlake follow` poll on a small and on a large lake, and how long after a
//! bar's end it is printed.
//!
//! ```sh
//! cargo bench --bench follow_poll -- [--big-lake target/follow-bench-lake] [--polls 40]
//! ```
//!
//! Under `cargo test` it runs as a smoke test: a lake of 20,000 swaps, two polls.
//!
//! The simulator runs as its own process (`dexlake sim --live --speed 600 --scale small`), so
//! the CPU time measured (`getrusage` of this process around each poll and its commit) is the
//! follower's alone. Two followers of the market's two most active tokens, 1-minute bars,
//! polling every 200 ms:
//!
//! - on a new lake (the tokens' history, about ten thousand swaps, is its first poll's sync);
//! - on a hard-linked copy of `--big-lake`: 10 million swaps of other tokens over the three
//!   months before the market's fixed now, written once by this bench (ids far above the
//!   simulator's, as one service's ids never collide), the same tokens synced into it first.
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

/// Writes `rows` swaps of 100 other tokens over the 92 days before the simulated market's
/// fixed now into a new lake at `root`, a million rows per commit, then compacts it.
fn write_big_lake(root: &Path, rows: i64) {
    use arrow_array::RecordBatch;
    use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
    use dexlake::lake::{Dataset, schema};
    const FIRST_ID: i64 = 1_000_000_000_000;
    let lake = Lake::open(root).unwrap();
    let end = 1_748_736_000_000_000i64; // 2025-06-01T00:00:00Z, µs
    let span = 92 * 86_400_000_000i64;
    let per_commit = 1_000_000i64;
    for block in 0..(rows + per_commit - 1) / per_commit {
        let ids: Vec<i64> = (block * per_commit..((block + 1) * per_commit).min(rows)).collect();
        let text = |f: &dyn Fn(i64) -> String| -> ArrayRef {
            Arc::new(ids.iter().map(|&i| Some(f(i))).collect::<StringArray>())
        };
        let num = |f: &dyn Fn(i64) -> f64| -> ArrayRef {
            Arc::new(ids.iter().map(|&i| f(i)).collect::<Float64Array>())
        };
        let token = |i: i64| format!("BenchToken{:03}", i % 100);
        // Times in order of id, spread evenly over the span.
        let times: Vec<i64> = ids
            .iter()
            .map(|&i| end - span + i * (span / rows))
            .collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(
                ids.iter().map(|i| FIRST_ID + i),
            )),
            text(&|i| {
                if i % 2 == 0 {
                    "quote_token"
                } else {
                    "token_quote"
                }
                .to_owned()
            }),
            text(&|_| "bench".to_owned()),
            text(&|i| format!("BenchWallet{:05}", i % 20_000)),
            text(&|i| format!("BenchPool{:03}", i % 100)),
            text(&|i| {
                if i % 2 == 0 {
                    "BenchQuote".to_owned()
                } else {
                    token(i)
                }
            }),
            text(&|i| {
                if i % 2 == 0 {
                    token(i)
                } else {
                    "BenchQuote".to_owned()
                }
            }),
            num(&|i| 1.0 + (i % 7) as f64),
            num(&|i| 2.0 + (i % 11) as f64),
            num(&|i| 0.5 + (i % 13) as f64 / 100.0),
            num(&|i| 0.6 + (i % 17) as f64 / 100.0),
            num(&|_| 100.0),
            num(&|_| 100.0),
            num(&|_| 99.0),
            num(&|_| 101.0),
            num(&|i| 10.0 + (i % 5) as f64),
            num(&|i| 10.0 + (i % 5) as f64),
            Arc::new(Int64Array::from_iter_values(
                ids.iter().map(|i| 300_000_000 + i),
            )),
            Arc::new(TimestampMicrosecondArray::from(times).with_timezone("UTC")),
            text(&|i| format!("benchtx{i}")),
        ];
        let batch = RecordBatch::try_new(schema::record_schema(Dataset::Swaps), columns).unwrap();
        let mut tx = lake.transaction().unwrap();
        tx.write(Dataset::Swaps, batch).unwrap();
        tx.commit().unwrap();
    }
    lake.compact().unwrap();
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
        let polled = cpu_seconds();
        follower.commit(&poll.closed).unwrap();
        m.cpu_ms.push((cpu_seconds() - cpu) * 1e3);
        if std::env::var_os("FOLLOW_POLL_ALL").is_some() {
            eprintln!(
                "poll {:.1} ms (sync {:?} wall), commit {:.1} ms, {} new",
                (polled - cpu) * 1e3,
                poll.sync.elapsed,
                (cpu_seconds() - polled) * 1e3,
                poll.new_events
            );
        }
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
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this once as a smoke
    // test: a lake of 20,000 swaps in a temporary folder and two polls.
    let smoke = !args.iter().any(|a| a == "--bench");
    let scratch = tempfile::tempdir().unwrap();
    let big = match (smoke, arg("--big-lake")) {
        (true, _) => scratch.path().join("big"),
        (false, Some(path)) => PathBuf::from(path),
        (false, None) => PathBuf::from("target/follow-bench-lake"),
    };
    let polls: usize = if smoke {
        2
    } else {
        arg("--polls").and_then(|p| p.parse().ok()).unwrap_or(40)
    };
    if !big.join("_dexlake").exists() {
        let started = Instant::now();
        write_big_lake(&big, if smoke { 20_000 } else { 10_000_000 });
        println!("wrote {} in {:.0?}", big.display(), started.elapsed());
    }

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
    let mut stdout = std::io::BufReader::new(sim.stdout.take().unwrap());
    stdout.read_line(&mut first).unwrap();
    // Keep reading what the simulator prints after its first line (a live market prints a
    // second): a closed pipe would make its next write fail and stop it.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
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
    if std::env::var_os("FOLLOW_POLL_ALL").is_some() {
        println!("CPU per poll (ms), new: {:.1?}", a.cpu_ms);
        println!("CPU per poll (ms), large: {:.1?}", b.cpu_ms);
    }
    println!(
        "CPU per poll, large / new: {:.2}",
        median(b.cpu_ms) / median(a.cpu_ms)
    );
}
