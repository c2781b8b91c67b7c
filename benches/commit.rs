//! Cost of the lake's bookkeeping as the lake grows: a commit, and a read of one sync state,
//! on lakes whose manifest lists 100, 10,000 and 100,000 files. Run with
//! `cargo bench --bench commit`.
//!
//! The listed files are manifest entries of snapshot datasets that no benchmarked write reads,
//! so building a lake of 100,000 files takes one checkpoint, not 100,000 Parquet writes. Each
//! group measures:
//! - `commit`: a warm handle commits one sync state and a batch of 20 swaps (one new file);
//!   every so many commits this includes writing a checkpoint, as in real use;
//! - `state_warm`: a handle that read the lake before reads one state value;
//! - `state_cold`: `Lake::open` then one state value, as a new process does;
//! - `files_cold`: a new handle reads the whole file list, as the first scan of a process does
//!   (this one grows with the lake, by design);
//! - `rewrite_whole_manifest`: what a commit cost when the manifest was one JSON document
//!   rewritten each time (serialise, write atomically, parse back), for comparison.
//!
//! The `history` group reads the history (`Lake::history`, what `dexlake log` prints) of a log
//! of 10,000 and 100,000 commits, cold (a new handle): the records of all but the last
//! 1,999 commits are in history files of 2,000 records (as checkpoints leave them), the last
//! 1,999 in their log entries, each a real commit of a sync state.

use std::collections::BTreeMap;
use std::hint::black_box;

use chrono::{TimeZone, Utc};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use dexlake::lake::sample::Samples;
use dexlake::lake::test_support::{MANIFEST_FORMAT_VERSION, start_over, write_history_records};
use dexlake::lake::{CommitRecord, Dataset, DatasetChange, FileEntry, Lake, Manifest, convert};

/// Full sizes under `cargo bench`; small ones when `cargo test --all-targets` runs each
/// benchmark once as a smoke test (criterion passes `--bench` only in the former case).
fn sizes() -> Vec<usize> {
    if std::env::args().any(|a| a == "--bench") {
        vec![100, 10_000, 100_000]
    } else {
        vec![100, 1_000]
    }
}

/// A lake whose manifest lists `files` token-profile files (never read by the benchmark).
fn lake_with(files: usize) -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("open");
    let t = Utc
        .with_ymd_and_hms(2020, 1, 1, 0, 0, 0)
        .single()
        .expect("time");
    let mut listed = BTreeMap::new();
    for i in 0..files {
        let day = i / 1000;
        let path = format!(
            "token_profiles/chain=altchain/date=2020-{:02}-{:02}/part-{i:016x}.parquet",
            1 + day / 28 % 12,
            1 + day % 28
        );
        listed.insert(
            path,
            FileEntry {
                dataset: Dataset::TokenProfiles,
                rows: 1_000,
                bytes: 250_000,
                min_time: t,
                max_time: t,
                schema_version: 1,
                min_id: None,
                max_id: None,
            },
        );
    }
    let mut state = BTreeMap::new();
    for job in 0..4_000 {
        state.insert(
            format!("swaps/pool=P{job:05}"),
            serde_json::json!({"newest": {"slot": job, "id": job}, "count": 2500}),
        );
    }
    let manifest = Manifest {
        format_version: MANIFEST_FORMAT_VERSION,
        version: 1,
        committed_at: Some(t),
        files: listed,
        state,
        removed: BTreeMap::new(),
    };
    start_over(lake.store(), &manifest).expect("checkpoint");
    let lake = Lake::open(dir.path()).expect("open again");
    (dir, lake)
}

fn bookkeeping(c: &mut Criterion) {
    let swaps = Samples::generate(7, 20).swaps;
    for files in sizes() {
        let (dir, lake) = lake_with(files);
        let mut group = c.benchmark_group(format!("lake_{files}_files"));
        group.sample_size(30);

        let mut n = 0u64;
        group.bench_function(BenchmarkId::new("commit", files), |b| {
            b.iter(|| {
                n += 1;
                let mut batch = swaps.clone();
                for (k, s) in batch.iter_mut().enumerate() {
                    s.id = (n as i64) * 100 + k as i64;
                }
                let mut tx = lake.transaction().expect("transaction");
                tx.write(
                    Dataset::Swaps,
                    convert::swaps_to_batch(&batch).expect("batch"),
                )
                .expect("write");
                tx.set_state("swaps/pool=P00001", serde_json::json!({"n": n}));
                tx.commit().expect("commit")
            })
        });
        group.bench_function(BenchmarkId::new("state_warm", files), |b| {
            b.iter(|| lake.state(black_box("swaps/pool=P00042")).expect("state"))
        });
        group.bench_function(BenchmarkId::new("state_cold", files), |b| {
            b.iter(|| {
                let fresh = Lake::open(dir.path()).expect("open");
                fresh.state(black_box("swaps/pool=P00042")).expect("state")
            })
        });
        group.sample_size(10);
        group.bench_function(BenchmarkId::new("files_cold", files), |b| {
            b.iter(|| {
                let fresh = Lake::open(dir.path()).expect("open");
                fresh.snapshot().expect("files").files.len()
            })
        });
        let whole = lake.manifest().expect("manifest");
        group.bench_function(BenchmarkId::new("rewrite_whole_manifest", files), |b| {
            b.iter(|| {
                let bytes = whole.to_bytes();
                lake.store()
                    .put("_dexlake/bench-manifest.json", &bytes)
                    .expect("put");
                let back = lake
                    .store()
                    .get("_dexlake/bench-manifest.json")
                    .expect("get");
                Manifest::parse(&back).expect("parse").files.len()
            })
        });
        group.finish();
    }
}

/// Commits in the log entries after the history files.
const TAIL: u64 = 1_999;

/// A lake whose log holds `commits` commits (see the module's docs).
fn lake_with_history(commits: u64) -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("open");
    let t = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .expect("time");
    let base = commits - TAIL;
    let manifest = Manifest {
        format_version: MANIFEST_FORMAT_VERSION,
        version: base,
        committed_at: Some(t),
        ..Manifest::default()
    };
    // The checkpoint at `base` (its history file holds its own record), then the records of
    // the commits before it, 2,000 per file.
    start_over(lake.store(), &manifest).expect("checkpoint");
    let record = |version: u64| CommitRecord {
        version,
        committed_at: Some(t + chrono::Duration::seconds(version as i64)),
        operation: "sync".into(),
        datasets: [
            (
                Dataset::Swaps,
                DatasetChange {
                    files_added: 2,
                    rows_added: 5_000,
                    files_removed: 0,
                    rows_removed: Some(0),
                    files_vacuumed: 0,
                },
            ),
            (
                Dataset::Trades,
                DatasetChange {
                    files_added: 1,
                    rows_added: 700,
                    files_removed: 0,
                    rows_removed: Some(0),
                    files_vacuumed: 0,
                },
            ),
        ]
        .into(),
        state: vec![
            format!("sync/swaps/token=T{version:08}"),
            format!("sync/trades/token=T{version:08}"),
        ],
    };
    let mut first = 1;
    while first < base {
        let last = (first + 1_999).min(base - 1);
        let records: Vec<CommitRecord> = (first..=last).map(record).collect();
        write_history_records(lake.store(), last, &records).expect("history file");
        first = last + 1;
    }
    let lake = Lake::open(dir.path()).expect("open again");
    for k in 0..TAIL {
        let mut tx = lake.transaction().expect("transaction");
        tx.set_state(
            format!("sync/swaps/token=T{k:08}"),
            serde_json::json!({"n": k}),
        );
        tx.set_operation("sync");
        tx.commit().expect("commit");
    }
    (dir, lake)
}

fn history(c: &mut Criterion) {
    let sizes: Vec<u64> = if std::env::args().any(|a| a == "--bench") {
        vec![10_000, 100_000]
    } else {
        vec![2_500]
    };
    let mut group = c.benchmark_group("history");
    group.sample_size(10);
    for commits in sizes {
        let (dir, _lake) = lake_with_history(commits);
        group.bench_function(BenchmarkId::new("read_cold", commits), |b| {
            b.iter(|| {
                let fresh = Lake::open(dir.path()).expect("open");
                let history = fresh.history().expect("history");
                assert_eq!(history.records.len() as u64, commits);
                history.records.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bookkeeping, history);
criterion_main!(benches);
