//! The `dexlake` command's exit status for each kind of failure (README, "Exit statuses"):
//! usage 2, no data 3, incomplete 4, damaged lake 5, service 6, busy 7, interrupted 130.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use dexlake::lake::{Dataset, Lake};
use dexlake::sim::Scale;

use crate::common;

const TOKEN: &str = "T0000000000000000000000000000000000000000";

/// Runs `dexlake --lake <lake> <args>`.
fn dexlake(lake: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(lake)
        .args(args)
        .output()
        .expect("the dexlake binary runs")
}

/// Asserts that `out` exited with `status`, printed nothing on stdout, and said `needle` in its
/// one-line error.
fn assert_exit(out: &Output, status: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "{err}");
    assert!(out.stdout.is_empty(), "{err}");
    assert!(err.contains(needle), "{needle:?} not in {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A fixture lake of every dataset (written by the CLI; its syncs recorded no coverage) in a
/// new folder.
fn fixture_lake() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("lake");
    let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["fixture-lake", "--rows", "500"])
        .arg(&root)
        .output()
        .expect("the dexlake binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, root)
}

#[test]
fn usage_exits_2() {
    let (_dir, root) = fixture_lake();
    // A flag value clap refuses.
    let out = dexlake(&root, &["ohlcv", "--token", TOKEN, "--interval", "ten"]);
    assert_exit(&out, 2, "--interval");
    // A combination of flags the command refuses itself.
    let out = dexlake(&root, &["sync"]);
    assert_exit(&out, 2, "say what to sync");
    let out = dexlake(&root, &["pnl"]);
    assert_exit(&out, 2, "give --wallet W");
    // An argument the library refuses.
    let out = dexlake(
        &root,
        &[
            "ohlcv",
            "--token",
            TOKEN,
            "--ticks",
            "10",
            "--tz",
            "Europe/Paris",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A folder that is not a lake.
    let out = dexlake(
        &root.join("swaps"),
        &["ohlcv", "--token", TOKEN, "--interval", "60"],
    );
    assert_exit(&out, 2, "not a dexlake lake");
}

#[test]
fn no_data_exits_3() {
    let (_dir, root) = fixture_lake();
    let unknown = "T9999999999999999999999999999999999999999";
    let out = dexlake(&root, &["ohlcv", "--token", unknown, "--interval", "3600"]);
    assert_exit(
        &out,
        3,
        &format!("no swaps for token {unknown} in the lake at"),
    );
    let out = dexlake(&root, &["price-stats", "--tokens", unknown]);
    assert_exit(&out, 3, "no swaps for tokens");
}

#[test]
fn incomplete_with_strict_exits_4() {
    // The fixture lake's rows came from no sync, so no coverage was recorded of them.
    let (_dir, root) = fixture_lake();
    let args = ["ohlcv", "--token", TOKEN, "--interval", "3600"];
    let out = dexlake(&root, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("warning:"), "{err}");
    let mut strict = args.to_vec();
    strict.push("--strict");
    let out = dexlake(&root, &strict);
    assert_exit(
        &out,
        4,
        "--strict: the lake does not completely cover what was asked",
    );
}

#[test]
fn a_damaged_lake_exits_5() {
    let (_dir, root) = fixture_lake();
    let lake = Lake::open(&root).expect("open");
    let (path, entry) = lake
        .manifest()
        .expect("manifest")
        .files_of(Dataset::Swaps)
        .map(|(p, e)| (p.clone(), e.clone()))
        .next()
        .expect("a swaps file");
    drop(lake);
    // Cut to half its size.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(root.join(&path))
        .expect("open the file");
    file.set_len(entry.bytes / 2).expect("truncate");
    drop(file);
    for args in [
        &["ohlcv", "--all-tokens", "--interval", "3600"][..],
        &["pnl", "--top", "3"],
        &["sql", "select count(*) as n from swaps"],
    ] {
        let out = dexlake(&root, args);
        assert_exit(&out, 5, &path);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("dexlake verify"), "{err}");
    }
    // `check` keeps 1 for findings: a damaged lake is 5 there too.
    let out = dexlake(&root, &["check"]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_refusal_exits_6() {
    let sim = common::tiny_sim(7).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(dir.path().join("lake"))
        .args(["--base-url", sim.base_url(), "--api-key", "not-the-key"])
        .args(["sync", "swaps", "--token", &token])
        .output()
        .await
        .expect("the dexlake binary runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("401"), "{err}");
}

#[test]
fn a_held_lake_exits_7() {
    let (_dir, root) = fixture_lake();
    let lake = Lake::open(&root).expect("open");
    let held = lake.transaction().expect("the lock");
    let out = dexlake(&root, &["compact", "--lock-timeout", "0"]);
    drop(held);
    assert_exit(&out, 7, "locked by another writer");
    // Released, the same command works.
    let out = dexlake(&root, &["compact", "--lock-timeout", "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_sync_exits_130() {
    use tokio::io::AsyncBufReadExt;
    let sim = common::sim_at(7, Scale::Small).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().expect("temp dir");
    // Slow (5 requests per second), so the interrupt lands while the job runs.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(dir.path().join("lake"))
        .args(["--base-url", sim.base_url(), "--api-key", "demo-key"])
        .args(["sync", "swaps", "--token", &token, "--rps", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the dexlake binary runs");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            if line.starts_with("start: ") {
                return;
            }
        }
        panic!("the sync ended before its job started");
    })
    .await
    .expect("the job starts in time");
    let rest = tokio::spawn(async move {
        let mut rest = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            rest.push(line);
        }
        rest
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = child.id().expect("running").to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill runs")
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("exits after Ctrl-C")
        .expect("wait");
    let rest = rest.await.expect("stderr");
    assert_eq!(status.code(), Some(130), "{rest:?}");
    // The line says what was kept, as it is: no `error:`.
    assert!(
        rest.iter()
            .any(|l| l.starts_with("interrupted: 1 job stopped (progress committed)")),
        "{rest:?}"
    );
    assert!(!rest.iter().any(|l| l.starts_with("error:")), "{rest:?}");
}
