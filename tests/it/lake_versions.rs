//! Reads as of a version (`--as-of`, `Lake::at`), retention and `dexlake vacuum`: every reading
//! command pinned to a version answers byte for byte what it answered then, before and after
//! the lake moves on and is compacted; a vacuum keeps what its retention needs and refuses a
//! version it left by name; a reader holding a version reads it while another process compacts
//! and vacuums.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use dexlake::lake::{Dataset, Lake, VacuumOptions};
use dexlake::prelude::SearchRequest;
use dexlake::sim::Simulator;
use dexlake::sync::{Job, SyncConfig, Syncer};
use serde_json::{Value, json};

use crate::common::lake::{bounded, scanned_frame};
use crate::common::{sim_client, tiny_sim};

fn dexlake(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(root)
        .args(args)
        .output()
        .expect("the dexlake binary runs")
}

/// `dexlake args` on `root`; its stdout, the test failing with stderr on a failure.
fn stdout(root: &Path, args: &[&str]) -> String {
    let out = dexlake(root, args);
    assert!(
        out.status.success(),
        "dexlake {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Syncs the swaps and trades of `tokens` (and, with `profiles`, a profile snapshot) of `sim`.
async fn sync(sim: &Simulator, lake: &Arc<Lake>, tokens: &[String], profiles: bool) {
    let mut jobs = Vec::new();
    for t in tokens {
        jobs.push(Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        });
        jobs.push(Job::Trades {
            token: Some(t.clone()),
            wallet: None,
        });
    }
    if profiles {
        let request: SearchRequest =
            serde_json::from_value(json!({"options": {"include_market": true}, "limit": 100}))
                .expect("request");
        jobs.push(Job::AltProfiles { request });
    }
    let syncer = Syncer::new(sim_client(sim), Arc::clone(lake), SyncConfig::default());
    let report = syncer.run(&jobs).await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
}

/// The reading commands, each as the arguments after `dexlake --lake L`.
fn reading_commands(token: &str, request: &Path) -> Vec<Vec<String>> {
    let request = request.to_string_lossy().into_owned();
    [
        vec![
            "ohlcv",
            "--all-tokens",
            "--interval",
            "3600",
            "--format",
            "csv",
        ],
        vec![
            "ohlcv", "--token", token, "--source", "trades", "--ticks", "50",
        ],
        vec!["price-stats", "--tokens", token, "--format", "json"],
        vec!["pnl", "--all-wallets", "--format", "csv"],
        vec!["token-metrics", "--token", token, "--format", "json"],
        vec!["search", "--request", &request],
        vec!["status", "--format", "json"],
        vec!["check", "--format", "json"],
        vec![
            "sql",
            "select count(*) as n, max(id) as last, max(block_time) as newest from swaps",
            "--format",
            "csv",
        ],
        vec!["views", "--engine", "duckdb"],
        vec!["log", "--format", "json"],
    ]
    .into_iter()
    .map(|a| a.into_iter().map(str::to_owned).collect())
    .collect()
}

/// Each command's stdout and exit status, `--as-of` the given pin when there is one.
fn answers(root: &Path, commands: &[Vec<String>], as_of: Option<&str>) -> Vec<(String, i32)> {
    commands
        .iter()
        .map(|args| {
            let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Some(v) = as_of {
                args.extend(["--as-of", v]);
            }
            let out = dexlake(root, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            let code = out.status.code().expect("an exit status");
            assert!(code <= 1, "{args:?} exited {code}: {err}");
            (String::from_utf8(out.stdout).expect("UTF-8"), code)
        })
        .collect()
}

fn assert_same(
    commands: &[Vec<String>],
    then: &[(String, i32)],
    now: &[(String, i32)],
    when: &str,
) {
    for ((args, a), b) in commands.iter().zip(then).zip(now) {
        assert_eq!(a, b, "`{}` {when}", args.join(" "));
    }
}

/// The views script's file list differs once the lake moves on, and the log's top line: the
/// pinned answers must still be those of V, which these make sure actually changed.
fn changed(then: &[(String, i32)], now: &[(String, i32)]) -> usize {
    then.iter().zip(now).filter(|(a, b)| a != b).count()
}

/// Runs `dexlake follow` of `token` against `sim` until the lake's history holds one of its
/// commits (within a generous bound), then kills it: what it committed stays, and the next
/// writer cleans up whatever the kill interrupted.
async fn follow_until_it_commits(sim: &Simulator, root: &Path, token: &str) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(root)
        .args([
            "--base-url",
            sim.base_url(),
            "--api-key",
            dexlake::sim::DEMO_KEY,
        ])
        .args([
            "follow",
            "--token",
            token,
            "--interval",
            "3600",
            "--poll",
            "0.2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("follow starts");
    let reader = Lake::open_existing(root).expect("open");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let history = reader.history().expect("history");
        if history.records.iter().any(|r| r.operation == "follow") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "follow committed nothing in 120 s"
        );
        assert!(child.try_wait().expect("wait").is_none(), "follow stopped");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    child.kill().await.expect("kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reading_command_as_of_a_version_answers_what_it_answered_then() {
    let sim = tiny_sim(11).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("lake");
    let lake = Arc::new(Lake::open(&root).expect("lake"));
    let tokens: Vec<String> = sim.market().catalog().altchain.tokens[..4]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    sync(&sim, &lake, &tokens[..1], true).await;
    let v = lake.version().expect("version");
    let request = dir.path().join("request.json");
    std::fs::write(&request, r#"{"limit": 5}"#).expect("request");
    let token = tokens[0].clone();
    let commands = reading_commands(&token, &request);
    let then = {
        let (root, commands) = (root.clone(), commands.clone());
        tokio::task::spawn_blocking(move || answers(&root, &commands, None))
            .await
            .expect("the answers at V")
    };
    // More of the market, a follow, then compaction: the newest answers change.
    sync(&sim, &lake, &tokens[1..3], false).await;
    follow_until_it_commits(&sim, &root, &tokens[3]).await;
    sim.shutdown().await;
    bounded(900, move || {
        let at_v = Lake::open_existing(&root)
            .expect("open")
            .at(v)
            .expect("pin");
        assert_eq!(at_v.version().expect("version"), v);
        let pinned = answers(&root, &commands, Some(&v.to_string()));
        let newest = answers(&root, &commands, None);
        assert!(changed(&then, &newest) >= 4, "the lake moved on");
        assert_same(&commands, &then, &pinned, "as of V, before the compaction");

        // A time picks the last version committed at or before it.
        let log: Value =
            serde_json::from_str(&stdout(&root, &["log", "--format", "json"])).expect("log JSON");
        let committed_at = log["records"]
            .as_array()
            .expect("commits")
            .iter()
            .find(|c| c["version"] == json!(v))
            .and_then(|c| c["committed_at"].as_str())
            .expect("V's time")
            .to_owned();
        let by_time = answers(&root, &commands[..2], Some(&committed_at));
        assert_same(&commands[..2], &then[..2], &by_time, "as of V's time");

        // After a compaction, and a vacuum whose retention covers V.
        stdout(&root, &["compact"]);
        let pinned = answers(&root, &commands, Some(&v.to_string()));
        assert_same(&commands, &then, &pinned, "as of V, after the compaction");
        let dry = stdout(&root, &["vacuum", "--dry-run", "--retain", "0s"]);
        assert!(dry.contains("would delete"), "{dry}");
        stdout(&root, &["vacuum", "--retain", "7d"]);
        let pinned = answers(&root, &commands, Some(&v.to_string()));
        assert_same(
            &commands,
            &then,
            &pinned,
            "as of V, after a vacuum keeping it",
        );
        let report = Lake::open_existing(&root)
            .expect("open")
            .verify()
            .expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
        assert!(report.retained > 0, "the compaction's files are retained");

        // A vacuum that keeps only the newest version: V is refused by name, the newest reads.
        let out = stdout(&root, &["vacuum", "--retain", "0s"]);
        assert!(out.contains("committed as version"), "{out}");
        let oldest = Lake::open_existing(&root)
            .expect("open")
            .oldest_readable_version()
            .expect("oldest");
        assert!(oldest > v);
        for args in &commands {
            let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
            let v = v.to_string();
            args.extend(["--as-of", &v]);
            let out = dexlake(&root, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("the oldest readable version is {oldest}")),
                "{args:?}: {err}"
            );
        }
        let after = answers(&root, &commands[..2], None);
        assert_same(
            &commands[..2],
            &newest[..2],
            &after,
            "the newest, after vacuums",
        );
        let report = Lake::open_existing(&root)
            .expect("open")
            .verify()
            .expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!(report.retained, 0, "nothing retained after --retain 0s");

        // A version that does not exist yet, and text that is neither.
        let out = dexlake(&root, &["status", "--as-of", "999999"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist yet"));
        let out = dexlake(&root, &["status", "--as-of", "yesterday"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("RFC 3339"));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_holding_a_version_reads_it_while_another_process_compacts_and_vacuums() {
    let sim = tiny_sim(12).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("lake");
    let lake = Arc::new(Lake::open(&root).expect("lake"));
    let tokens: Vec<String> = sim.market().catalog().altchain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    sync(&sim, &lake, &tokens[..1], false).await;
    sim.shutdown().await;
    bounded(300, move || {
        let v = lake.version().expect("version");
        let pinned = lake.at(v).expect("pin");
        let before: Vec<_> = [Dataset::Swaps, Dataset::Trades]
            .iter()
            .map(|d| scanned_frame(&pinned, *d))
            .collect();
        // Another writer adds small files, then another process compacts and vacuums with a
        // retention that covers V.
        for k in 0..3 {
            crate::common::lake::write_all(
                &lake,
                &[(
                    Dataset::Swaps,
                    dexlake::lake::convert::swaps_to_batch(&crate::common::lake::block_swaps(
                        1_000 + k,
                        5,
                    ))
                    .expect("batch"),
                )],
            );
        }
        let out = dexlake(&root, &["compact"]);
        assert!(out.status.success(), "{out:?}");
        let out = dexlake(&root, &["vacuum", "--retain", "1h"]);
        assert!(out.status.success(), "{out:?}");
        for (d, frame) in [Dataset::Swaps, Dataset::Trades].iter().zip(&before) {
            assert!(
                scanned_frame(&pinned, *d).equals_missing(frame),
                "{d} as of {v}"
            );
        }
        assert!(lake.row_count(Dataset::Swaps).expect("rows") > before[0].height() as u64);
        // A pinned handle refuses to write.
        let Err(err) = pinned.transaction() else {
            panic!("a pinned handle wrote")
        };
        assert!(err.to_string().contains("cannot write"), "{err}");
        // The vacuum is in the log; a dry run changes nothing.
        let history = lake.history().expect("history");
        assert!(
            history
                .records
                .iter()
                .all(|r| r.operation != "vacuum" || r.version > v)
        );
        let report = lake
            .vacuum(VacuumOptions {
                retain: std::time::Duration::ZERO,
                dry_run: true,
            })
            .expect("dry run");
        assert!(report.dry_run && report.version.is_none() && !report.files.is_empty());
        for (path, _) in &report.files {
            assert!(
                root.join(path).exists(),
                "a dry run deletes nothing: {path}"
            );
        }
        let version = lake.version().expect("version");
        let report = lake
            .vacuum(VacuumOptions {
                retain: std::time::Duration::ZERO,
                dry_run: false,
            })
            .expect("vacuum");
        assert_eq!(report.version, Some(version + 1));
        for (path, _) in &report.files {
            assert!(!root.join(path).exists(), "vacuumed: {path}");
        }
        let history = lake.history().expect("history");
        assert_eq!(history.records[0].operation, "vacuum");
        let err = lake.at(v).expect_err("V is gone");
        assert!(
            err.to_string()
                .contains(&format!("the oldest readable version is {version}")),
            "{err}"
        );
        // Vacuuming again has nothing to do and commits nothing.
        let again = lake.vacuum(VacuumOptions::default()).expect("vacuum");
        assert_eq!(again.version, None);
        assert!(lake.verify().expect("verify").is_ok());
    });
}
