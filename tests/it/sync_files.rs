//! The files a sync writes: commits that merge the small files of the days they write give the
//! same rows and the same answers (bars, PnL) as commits that each add their own files and a
//! compaction of everything at the end, in files that are no longer small, with less left to
//! rewrite at the end; every version in between reads each row once.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dexlake::lake::{Dataset, Lake, LakeOptions};
use dexlake::prelude::LakeQuery;
use dexlake::query::Bars;
use dexlake::sim::{Scale, SimConfig, Simulator};
use dexlake::sync::{Job, SyncConfig, SyncReport, Syncer};
use polars::prelude::*;
use serde_json::Value;

/// Files of fewer rows are small in these lakes: small enough that the tiny market's days
/// (about 65 swaps each) outgrow it.
const SMALL: usize = 24;

async fn sim() -> Simulator {
    Simulator::start(SimConfig {
        seed: 11,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts")
}

/// Swaps of every altchain pool and trades of every altchain wallet of the catalog.
fn jobs(sim: &Simulator) -> Vec<Job> {
    let v = serde_json::to_value(sim.market().catalog()).expect("catalog serialises");
    let list = |name: &str| -> Vec<String> {
        v["altchain"][name]
            .as_array()
            .expect("catalog list")
            .iter()
            .map(|x| {
                x.get("address")
                    .and_then(Value::as_str)
                    .expect("an address")
                    .to_owned()
            })
            .collect()
    };
    let mut jobs: Vec<Job> = list("pools")
        .into_iter()
        .map(|p| Job::Swaps {
            token: None,
            wallet: None,
            pool: Some(p),
        })
        .collect();
    jobs.extend(list("wallets").into_iter().map(|w| Job::Trades {
        token: None,
        wallet: Some(w),
    }));
    jobs
}

fn lake_at(dir: &std::path::Path) -> Arc<Lake> {
    let options = LakeOptions {
        compact_below_rows: SMALL,
        ..LakeOptions::default()
    };
    Arc::new(Lake::open_with(dir, options).expect("open"))
}

/// Small commits, so that every day gets many of them.
fn config(merge_small_files: bool) -> SyncConfig {
    SyncConfig {
        recent_window: Duration::ZERO,
        parallel_jobs: 4,
        commit_rows: 400,
        merge_small_files,
        ..SyncConfig::default()
    }
}

async fn run(sim: &Simulator, lake: &Arc<Lake>, jobs: &[Job], config: SyncConfig) -> SyncReport {
    let sync = Syncer::new(
        common::sim_client_retrying(sim, 10),
        Arc::clone(lake),
        config,
    );
    let report = tokio::time::timeout(Duration::from_secs(300), sync.run(jobs))
        .await
        .expect("sync finishes in time");
    assert!(
        !report.any_failed() && !report.interrupted(),
        "{:?}",
        report.jobs
    );
    report
}

/// Every row of a dataset, in id order.
fn rows(lake: &Lake, dataset: Dataset) -> DataFrame {
    lake.scan(dataset)
        .expect("scan")
        .sort(["id"], SortMultipleOptions::default())
        .collect()
        .expect("collect")
}

/// The rows of each committed file of a dataset, by partition folder.
fn file_rows(lake: &Lake, dataset: Dataset) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (path, entry) in lake.manifest().expect("manifest").files_of(dataset) {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        out.entry(dir).or_default().push(entry.rows);
    }
    out
}

/// What `status` says each dataset and target holds and covers, without what depends on the
/// commits (version, times of the commits, files and their bytes).
fn coverage(lake: &Lake) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for k in ["version", "committed_at", "synced_at", "files", "bytes"] {
                    map.remove(k);
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(lake.query().status().expect("status")).expect("JSON");
    strip(&mut v);
    v
}

/// Rows the end compaction rewrote.
fn rewritten_at_end(report: &SyncReport) -> u64 {
    let compaction = report.compaction.as_ref().expect("the run compacts");
    let done = compaction.result.as_ref().expect("compaction succeeds");
    done.rows.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_commits_answer_as_before_in_files_that_are_not_small() {
    let sim = sim().await;
    let jobs = jobs(&sim);
    let old_dir = tempfile::tempdir().expect("temp dir");
    let old = lake_at(old_dir.path());
    let new_dir = tempfile::tempdir().expect("temp dir");
    let new = lake_at(new_dir.path());

    // Before: each commit adds its own files, the end compacts every file not yet full.
    let before = run(&sim, &old, &jobs, config(false)).await;
    assert_eq!(before.files_merged, 0);
    // Now: the plan in eight runs, merging as they commit: whatever the commits' timing, each
    // run adds about an eighth of every day, so the days outgrow `SMALL` in the commits of the
    // later runs.
    let runs = 8;
    let mut now = Vec::new();
    for i in 0..runs {
        let part = &jobs[i * jobs.len() / runs..(i + 1) * jobs.len() / runs];
        now.push(run(&sim, &new, part, config(true)).await);
    }
    let merged: u64 = now.iter().map(|r| r.files_merged).sum();
    assert!(merged > 0, "the commits merged small files");

    // The same rows, answers and coverage.
    for dataset in [Dataset::Swaps, Dataset::Trades] {
        let stored = rows(&old, dataset);
        assert!(
            stored.height() > 2 * SMALL,
            "{dataset}: {}",
            stored.height()
        );
        assert!(stored.equals_missing(&rows(&new, dataset)), "{dataset}");
    }
    assert_eq!(
        before.total_rows_added(),
        now.iter().map(SyncReport::total_rows_added).sum::<u64>()
    );
    let bars = |lake: &Lake| lake.query().bars(Bars::every(60)).expect("bars");
    assert!(bars(&old).equals_missing(&bars(&new)), "bars");
    let pnl = |lake: &Lake| lake.query().pnl().expect("pnl");
    assert!(pnl(&old).equals_missing(&pnl(&new)), "pnl");
    assert_eq!(coverage(&old), coverage(&new));

    // The files: in each day, every file but at most one holds `SMALL` rows or more.
    for dataset in [Dataset::Swaps, Dataset::Trades] {
        let files = file_rows(&new, dataset);
        assert!(!files.is_empty());
        for (dir, sizes) in &files {
            let small = sizes.iter().filter(|&&n| n < SMALL as u64).count();
            assert!(small <= 1, "{dir}: {sizes:?}");
        }
        let grown = files
            .values()
            .flatten()
            .filter(|&&n| n >= SMALL as u64)
            .count();
        assert!(grown > 0, "{dataset}: {files:?}");
    }
    // The end of the last run rewrote only what was still small.
    let total: u64 = [Dataset::Swaps, Dataset::Trades]
        .iter()
        .map(|d| old.row_count(*d).expect("rows"))
        .sum();
    let last_run = now.last().expect("runs");
    assert!(
        rewritten_at_end(last_run) < total / 4,
        "{} of {total} rows rewritten at the end",
        rewritten_at_end(last_run)
    );
    assert!(new.verify().expect("verify").is_ok());
    assert_eq!(new.compact().expect("compact").files_removed, 0);

    // Every version reads each row once, and no version loses rows another had.
    let newest = new.version().expect("version");
    let mut last = 0;
    for version in 1..=newest {
        let pinned = new.at(version).expect("pinned");
        let swaps = rows(&pinned, Dataset::Swaps);
        let ids = swaps
            .column("id")
            .expect("id")
            .as_materialized_series()
            .clone();
        assert_eq!(
            ids.n_unique().expect("unique"),
            swaps.height(),
            "v{version}"
        );
        assert!(swaps.height() >= last, "v{version}");
        last = swaps.height();
    }
    assert_eq!(last, rows(&old, Dataset::Swaps).height());
    // Among them, sync commits that merged files.
    let history = new.history().expect("history");
    assert!(
        history
            .records
            .iter()
            .any(|c| c.operation == "sync" && c.datasets.values().any(|d| d.files_removed > 0)),
        "no sync commit removed files"
    );
}

/// The seconds of a `Duration`'s debug text (`1.2s`, `340.5ms`, `12µs`).
fn seconds(text: &str) -> f64 {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("µs") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ns") {
        (n, 1e-9)
    } else {
        (text.strip_suffix('s').expect("a duration"), 1.0)
    };
    number.parse::<f64>().expect("a number") * scale
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timings_split_the_wall_time_into_fetching_committing_and_compaction() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let plan = dir.path().join("plan.toml");
    let pools: Vec<String> = jobs(&sim)
        .iter()
        .filter_map(|j| match j {
            Job::Swaps { pool: Some(p), .. } => {
                Some(format!("[[job]]\ndataset = \"swaps\"\npool = \"{p}\"\n"))
            }
            _ => None,
        })
        .collect();
    std::fs::write(&plan, pools.join("\n")).expect("plan");
    let lake = dir.path().join("lake");
    let base_url = sim.base_url().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .arg("--lake")
            .arg(&lake)
            .args(["--base-url", &base_url, "--api-key", "demo-key", "sync"])
            .args(["--commit-rows", "500", "--timings", "--plan"])
            .arg(&plan)
            .output()
            .expect("dexlake runs")
    })
    .await
    .expect("joined");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("  timings: fetching "))
        .unwrap_or_else(|| panic!("no timings line: {stdout}"));
    // "F, then committing C, then compaction K (of T); B committing in all"
    let (fetch, rest) = line.split_once(", then committing ").expect("committing");
    let (commit, rest) = rest.split_once(", then compaction ").expect("compaction");
    let (compaction, rest) = rest.split_once(" (of ").expect("total");
    let (total, _) = rest.split_once(')').expect("total");
    let parts = seconds(fetch) + seconds(commit) + seconds(compaction);
    let total = seconds(total);
    assert!(seconds(compaction) > 0.0, "{line}");
    // Each figure is printed to a tenth (or to its unit's tenth below a second).
    assert!(
        parts <= total + 0.2 && parts >= total * 0.9 - 0.2,
        "the parts {parts} s make the total {total} s: {line}"
    );
    assert!(
        stdout.contains("  merged in commits: "),
        "no merge count: {stdout}"
    );
}
