//! The lake's history (`Lake::history`, `dexlake log`): a record per commit across checkpoints
//! and the clean-up of their entries, what each commit added and removed, the operation that
//! made it.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use dexlake::lake::test_support as support;
use dexlake::lake::{Dataset, Lake, convert};
use dexlake::sync::{Job, SyncConfig, Syncer};
use serde_json::{Value, json};

use crate::common::lake::{block_swaps, bounded};
use crate::common::{sim_client, tiny_sim};

/// Swaps per commit.
const ROWS: i64 = 20;

fn dexlake(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(root)
        .args(args)
        .output()
        .expect("the dexlake binary runs")
}

#[test]
fn every_commit_has_its_record_across_checkpoints_and_the_clean_up_of_their_entries() {
    bounded(300, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let lake = Lake::open(&root).expect("open");
        // Enough commits for two checkpoints: the second deletes the entries the first covers.
        let commits = 2 * support::MIN_TAIL_ENTRIES as i64 + 30;
        for k in 0..commits {
            let mut tx = lake.transaction().expect("transaction");
            tx.write(
                Dataset::Swaps,
                convert::swaps_to_batch(&block_swaps(k, ROWS)).expect("batch"),
            )
            .expect("write");
            tx.set_state(format!("sync/swaps/block={k}"), json!(k));
            if k % 2 == 0 {
                tx.set_operation("sync");
            }
            tx.commit().expect("commit");
        }
        let files_before = lake.manifest().expect("manifest").files.len() as u64;
        let compacted = lake.compact().expect("compact");
        assert!(compacted.files_removed > 0, "{compacted:?}");
        assert!(
            root.join(support::entry_path(1)).exists(),
            "a checkpoint deletes no entry"
        );
        // A vacuum keeping only the newest version deletes the first entries, so the history
        // comes from its files.
        let vacuum = lake
            .vacuum(dexlake::lake::VacuumOptions {
                retain: std::time::Duration::ZERO,
                dry_run: false,
            })
            .expect("vacuum");
        assert_eq!(vacuum.files.len(), compacted.files_removed);
        let version = lake.manifest().expect("manifest").version;
        assert_eq!(version, commits as u64 + 2);
        assert!(
            !root.join(support::entry_path(1)).exists(),
            "the vacuum deleted the first entries"
        );

        assert!(
            root.join("_dexlake/history")
                .read_dir()
                .expect("history files")
                .count()
                >= 2,
            "a history file per checkpoint"
        );
        assert!(
            lake.verify().expect("verify").is_ok(),
            "history files are the lake's own"
        );
        let history = lake.history().expect("history");
        assert_eq!(history.unrecorded_before, None);
        let versions: Vec<u64> = history.records.iter().map(|r| r.version).collect();
        assert_eq!(
            versions,
            (1..=version).rev().collect::<Vec<_>>(),
            "newest first, each once"
        );
        // The vacuum changes no committed file; the compaction removed every row it added.
        assert_eq!(history.records[0].operation, "vacuum");
        let vacuumed = history.records[0].datasets[&Dataset::Swaps];
        assert_eq!(
            (
                vacuumed.files_vacuumed,
                vacuumed.files_added,
                vacuumed.files_removed
            ),
            (compacted.files_removed as u64, 0, 0)
        );
        let top = &history.records[1];
        assert_eq!(top.operation, "compact");
        let swaps = top.datasets[&Dataset::Swaps];
        assert_eq!(swaps.files_removed, compacted.files_removed as u64);
        assert_eq!(swaps.rows_removed, Some(swaps.rows_added));
        assert_eq!(swaps.rows_added, (commits * ROWS) as u64);
        assert!(swaps.files_removed <= files_before);
        // Each write: its file, its rows, its state key, its operation.
        for r in &history.records[2..] {
            let k = r.version as i64 - 1;
            let change = r.datasets[&Dataset::Swaps];
            assert!(change.files_added >= 1, "version {}", r.version);
            assert_eq!(
                (change.rows_added, change.files_removed, change.rows_removed),
                (ROWS as u64, 0, Some(0)),
                "version {}",
                r.version
            );
            assert_eq!(r.state, vec![format!("sync/swaps/block={k}")]);
            let expected = if k % 2 == 0 { "sync" } else { "write" };
            assert_eq!(r.operation, expected, "version {}", r.version);
            assert!(r.committed_at.is_some());
        }

        // The CLI prints the same records; `--dataset` keeps the commits that touched it.
        let out = dexlake(&root, &["log", "--format", "json", "--dataset", "swaps"]);
        assert!(out.status.success(), "{out:?}");
        let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            printed["records"].as_array().expect("records").len(),
            version as usize
        );
        assert_eq!(printed["records"][0]["operation"], json!("vacuum"));
        assert_eq!(printed["records"][1]["operation"], json!("compact"));
        assert_eq!(printed["unrecorded_before"], Value::Null);
        let out = dexlake(&root, &["log", "--format", "json", "--dataset", "trades"]);
        let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(printed["records"], json!([]));
        let out = dexlake(&root, &["log"]);
        let text = String::from_utf8(out.stdout).expect("text");
        assert_eq!(text.lines().count(), version as usize, "{text}");
        assert!(
            text.lines().next().unwrap().contains(&format!(
                "vacuum    swaps vacuumed {} files",
                compacted.files_removed
            )),
            "{text}"
        );
        assert!(
            text.lines().nth(1).unwrap().contains(&format!(
                "compact   swaps +{} files +{} rows -{} files -{} rows",
                swaps.files_added,
                commits * ROWS,
                compacted.files_removed,
                commits * ROWS
            )),
            "{text}"
        );
        let out = dexlake(&root, &["log", "--dataset", "nope"]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_names_its_commits_and_a_repair_its_new_base() {
    let sim = tiny_sim(3).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("lake");
    let lake = Arc::new(Lake::open(&root).expect("lake"));
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let syncer = Syncer::new(sim_client(&sim), Arc::clone(&lake), SyncConfig::default());
    let report = syncer
        .run(&[Job::Swaps {
            token: Some(token.clone()),
            wallet: None,
            pool: None,
        }])
        .await;
    assert!(!report.any_failed(), "{report:?}");
    sim.shutdown().await;
    let history = lake.history().expect("history");
    let syncs: Vec<_> = history
        .records
        .iter()
        .filter(|r| r.operation == "sync")
        .collect();
    assert!(!syncs.is_empty(), "{history:?}");
    let added: u64 = syncs
        .iter()
        .map(|r| r.datasets[&Dataset::Swaps].rows_added)
        .sum();
    let compacted: u64 = history
        .records
        .iter()
        .filter(|r| r.operation == "compact")
        .map(|r| r.datasets[&Dataset::Swaps].rows_removed.expect("known"))
        .sum();
    assert!(added > 0 && added == lake.row_count(Dataset::Swaps).unwrap());
    assert!(compacted <= added);
    assert!(
        syncs.iter().any(|r| r
            .state
            .iter()
            .any(|k| k.starts_with("sync/swaps/") && k.contains(&token))),
        "the sync records the state of its target: {syncs:?}"
    );

    // A repair starts the log over: its new base is in the history as a repair.
    std::fs::remove_file(root.join("_dexlake/_last_checkpoint.json")).ok();
    for entry in std::fs::read_dir(root.join("_dexlake/log")).expect("log") {
        std::fs::remove_file(entry.expect("entry").path()).expect("remove");
    }
    let repaired = bounded(120, move || {
        let out = dexlake(&root, &["verify", "--repair"]);
        assert!(out.status.success(), "{out:?}");
        let lake = Lake::open(&root).expect("repaired");
        let version = lake.manifest().expect("manifest").version;
        (version, lake.history().expect("history"))
    });
    let (version, history) = repaired;
    let top = &history.records[0];
    assert_eq!((top.operation.as_str(), top.version), ("repair", version));
}
