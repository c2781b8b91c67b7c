//! The commit log on disk when an entry is lost: a gap after the newest checkpoint is refused
//! by every reader and writer, naming the missing version, and `verify --repair` makes the log
//! continuous again; a gap the newest checkpoint already covers is harmless.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::lake::{block_swaps, bounded, committed_ids, write_all};
use dexlake::lake::test_support as support;
use dexlake::lake::{Dataset, Lake, convert};
use serde_json::json;

/// Swaps per commit of these tests.
const ROWS: i64 = 50;

/// Commits block `k` of swaps with the state `sync/cursor = k` and `sync/only-<k> = k`.
fn commit_block(lake: &Lake, k: i64) {
    let mut tx = lake.transaction().expect("transaction");
    tx.write(
        Dataset::Swaps,
        convert::swaps_to_batch(&block_swaps(k, ROWS)).expect("batch"),
    )
    .expect("write");
    tx.set_state("sync/cursor", json!(k));
    tx.set_state(format!("sync/only-{k}"), json!(k));
    tx.commit().expect("commit");
}

fn dexlake(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(root)
        .args(args)
        .output()
        .expect("the dexlake binary runs")
}

#[test]
fn a_log_missing_an_entry_is_refused_and_repair_makes_it_continuous() {
    bounded(180, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let lake = Lake::open(&root).expect("open");
        // Commit k is version k + 1; a second handle reads the lake once at version 2.
        let behind = Lake::open(&root).expect("open a second handle");
        for k in 0..5 {
            commit_block(&lake, k);
            if k == 1 {
                assert_eq!(behind.state("sync/cursor").expect("state"), Some(json!(1)));
            }
        }
        assert_eq!(lake.manifest().expect("manifest").version, 5);
        let entry = root.join(support::entry_path(3));
        std::fs::remove_file(&entry).expect("delete log entry 3");
        let names_the_gap = |err: &str| {
            err.contains("log entry 3 is missing")
                && err.contains("entries up to 5")
                && err.contains("dexlake verify --repair")
        };

        // Every reader refuses the lake instead of stopping at version 2.
        let err = Lake::open(&root).expect_err("a gap is refused").to_string();
        assert!(names_the_gap(&err), "{err}");
        let err = behind
            .state("sync/cursor")
            .expect_err("a handle behind the gap")
            .to_string();
        assert!(names_the_gap(&err), "{err}");
        assert!(behind.scan(Dataset::Swaps).is_err());
        // No writer commits version 3 again (entries 4 and 5 would then be applied on top).
        let err = behind
            .transaction()
            .map(drop)
            .expect_err("a write on a log with a gap")
            .to_string();
        assert!(names_the_gap(&err), "{err}");
        assert!(!entry.exists(), "nothing wrote version 3 again");

        // `verify` reports the gap instead of "ok"; so does a reading command.
        for args in [
            &["verify"][..],
            &["ohlcv", "--token", "TOK", "--interval", "60"][..],
        ] {
            let out = dexlake(&root, args);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?}: {stdout}");
            assert!(!stdout.lines().any(|l| l == "ok"), "{args:?}: {stdout}");
            assert!(names_the_gap(&stderr), "{args:?}: {stderr}");
        }

        // `verify --repair` rebuilds: every committed row stays (the files of the lost entry
        // are on disk), the state of the entries after the gap is kept, and only what the lost
        // entry alone set is gone.
        let out = dexlake(&root, &["verify", "--repair"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("rebuilt the manifest"), "{stdout}");
        assert!(stdout.lines().any(|l| l == "ok"), "{stdout}");
        let repaired = Lake::open(&root).expect("open after the repair");
        let version = repaired.manifest().expect("manifest").version;
        assert!(
            version > 5,
            "the repair is a new version after the log: {version}"
        );
        assert_eq!(committed_ids(&repaired), (0..5 * ROWS).collect::<Vec<_>>());
        assert_eq!(
            repaired.state("sync/cursor").expect("state"),
            Some(json!(4))
        );
        for k in [0, 1, 3, 4] {
            assert_eq!(
                repaired.state(&format!("sync/only-{k}")).expect("state"),
                Some(json!(k)),
                "state of commit {k}"
            );
        }
        assert_eq!(
            repaired.state("sync/only-2").expect("state"),
            None,
            "what only the lost entry set is gone"
        );
        assert!(repaired.verify().expect("verify").is_ok());

        // Commits go on after the repair, on every handle, and nothing is applied twice.
        commit_block(&repaired, 5);
        commit_block(&behind, 6);
        let fresh = Lake::open(&root).expect("open");
        assert_eq!(committed_ids(&fresh), (0..7 * ROWS).collect::<Vec<_>>());
        assert_eq!(fresh.manifest().expect("manifest").version, version + 2);
        assert_eq!(fresh.state("sync/cursor").expect("state"), Some(json!(6)));
        assert!(fresh.verify().expect("verify").is_ok());
    });
}

#[test]
fn an_entry_the_newest_checkpoint_covers_may_be_missing() {
    bounded(180, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let lake = Lake::open(&root).expect("open");
        write_all(
            &lake,
            &[(
                Dataset::Swaps,
                convert::swaps_to_batch(&block_swaps(0, ROWS)).expect("batch"),
            )],
        );
        // State commits past the checkpoint threshold: a checkpoint is written, and the
        // entries before it stay on disk until the next one.
        for i in 0..support::MIN_TAIL_ENTRIES + 3 {
            let mut tx = lake.transaction().expect("transaction");
            tx.set_state(format!("job/{}", i % 3), json!(i));
            tx.commit().expect("commit");
        }
        let last = support::last_checkpoint(lake.store())
            .expect("pointer")
            .expect("a checkpoint");
        assert!(last.version > 10, "{last:?}");
        let expected = lake.manifest().expect("manifest");
        let covered = root.join(support::entry_path(10));
        assert!(covered.exists(), "entries before the checkpoint are kept");
        std::fs::remove_file(&covered).expect("delete an entry the checkpoint covers");

        let fresh = Lake::open(&root).expect("a covered gap is no gap");
        assert_eq!(fresh.manifest().expect("manifest"), expected);
        assert!(fresh.verify().expect("verify").is_ok());
        let out = dexlake(&root, &["verify"]);
        assert!(out.status.success(), "{out:?}");
        commit_block(&fresh, 1);
        assert_eq!(
            committed_ids(&Lake::open(&root).expect("open")),
            (0..2 * ROWS).collect::<Vec<_>>()
        );
    });
}
