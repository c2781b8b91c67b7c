//! The lake on an S3-compatible object store: a real server (moto in server mode, from the
//! project's `.venv`) started on loopback by this test.
//!
//! Round trips of every dataset, idempotent writes, verify, compact, a streamed file uploaded
//! in parts, a writer killed with SIGKILL at random points, two writers racing on one lake,
//! and the CLI's sync, bars and PnL giving on `s3://` what they give on a folder.
//!
//! This test has its own `main` (`harness = false`): the server's address reaches the
//! library through the AWS variables of the environment, which are set once, before any
//! other thread runs. Without moto the test says so and passes, unless
//! `DEXLAKE_REQUIRE_S3=1` (set by `make test`) makes a missing server a failure.

#[path = "it/common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::dexlake_cli;
use common::lake::{
    batches_of, block_swaps, bounded, check_after_kill, commit_overlapping_small_files,
    committed_ids, crash_writer_loop, expected_frame, scanned_frame, small_file_options, write_all,
};
use dexlake::lake::sample::Samples;
use dexlake::lake::{Dataset, Lake, LakeOptions, Problem, convert};
use rand::{Rng, SeedableRng};

const BUCKET: &str = "lake-test";
/// Set in a child process of this test: which child it is.
const CHILD_ENV: &str = "DEXLAKE_S3_TEST_CHILD";
/// The lake a child writes to.
const CHILD_LAKE_ENV: &str = "DEXLAKE_S3_TEST_LAKE";
/// The first id block of a racing writer.
const CHILD_START_ENV: &str = "DEXLAKE_S3_TEST_START";
const ROWS_PER_COMMIT: i64 = 400;

/// The S3 server, stopped when its standard input closes (when this process ends).
struct S3Server {
    child: Child,
    _stdin: ChildStdin,
    endpoint: String,
}

impl S3Server {
    /// Starts `python/s3_server.py`, or returns why it cannot.
    fn start() -> Result<S3Server, String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = std::env::var_os("DEXLAKE_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".venv/bin/python"));
        let has_moto = Command::new(&python)
            .args(["-c", "import moto, boto3"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_moto {
            return Err(format!(
                "{} cannot import moto and boto3; run `make venv` (or set DEXLAKE_PYTHON)",
                python.display()
            ));
        }
        let mut child = Command::new(&python)
            .arg(root.join("python/s3_server.py"))
            .arg(BUCKET)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", python.display()))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| "the S3 server did not start within 60 s".to_owned())?;
        let endpoint = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("the S3 server printed {line:?}"))?
            .to_owned();
        Ok(S3Server {
            child,
            _stdin: stdin,
            endpoint,
        })
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A lake root of its own under the test bucket.
fn root(name: &str) -> String {
    format!("s3://{BUCKET}/{name}")
}

fn main() {
    if let Ok(child) = std::env::var(CHILD_ENV) {
        run_child(&child);
        return;
    }
    let server = match S3Server::start() {
        Ok(s) => s,
        Err(why) if std::env::var_os("DEXLAKE_REQUIRE_S3").is_some() => {
            panic!("DEXLAKE_REQUIRE_S3 is set but the S3 server cannot start: {why}")
        }
        Err(why) => {
            eprintln!("s3: skipped every object-store test: {why}");
            return;
        }
    };
    // SAFETY: no other thread of this process runs yet (the server's reader thread has
    // finished), so nothing reads the environment while it changes.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", &server.endpoint);
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
        std::env::set_var("AWS_REGION", "us-east-1");
    }
    let tests: &[(&str, u64, fn())] = &[
        ("every_dataset_round_trips", 120, every_dataset_round_trips),
        ("writes_are_idempotent", 120, writes_are_idempotent),
        (
            "verify_finds_a_missing_file",
            120,
            verify_finds_a_missing_file,
        ),
        (
            "compact_keeps_every_row_and_removes_the_old_files",
            180,
            compact_keeps_every_row_and_removes_the_old_files,
        ),
        (
            "a_streamed_file_is_uploaded_in_parts",
            120,
            a_streamed_file_is_uploaded_in_parts,
        ),
        (
            "a_writer_killed_at_random_points_leaves_a_readable_lake",
            300,
            a_writer_killed_at_random_points_leaves_a_readable_lake,
        ),
        (
            "two_racing_writers_lose_no_row_and_store_none_twice",
            300,
            two_racing_writers_lose_no_row_and_store_none_twice,
        ),
        (
            "the_cli_syncs_bars_and_pnl_on_s3_as_on_a_folder",
            400,
            the_cli_syncs_bars_and_pnl_on_s3_as_on_a_folder,
        ),
        (
            "bad_roots_are_refused_clearly",
            60,
            bad_roots_are_refused_clearly,
        ),
        (
            "a_log_missing_an_entry_is_refused_and_repaired",
            120,
            a_log_missing_an_entry_is_refused_and_repaired,
        ),
    ];
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut ran = 0;
    for (name, secs, test) in tests {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let start = Instant::now();
        eprint!("test s3::{name} ... ");
        bounded(*secs, *test);
        eprintln!("ok ({:.1} s)", start.elapsed().as_secs_f64());
        ran += 1;
    }
    eprintln!("s3: {ran} tests passed against {}", server.endpoint);
}

fn every_dataset_round_trips() {
    let lake = Lake::open(root("round-trip")).expect("open an s3 lake");
    assert_eq!(lake.root(), Path::new("s3://lake-test/round-trip"));
    let samples = Samples::generate(11, 300);
    let batches = samples.batches().expect("batches");
    let summary = write_all(&lake, &batches);
    assert_eq!(summary.rows_added, samples.row_counts());
    // A handle opened afresh reads the same lake from the store.
    let again = Lake::open(root("round-trip")).expect("open again");
    for dataset in Dataset::ALL {
        let want = expected_frame(dataset, &batches_of(&batches, dataset));
        let got = scanned_frame(&again, dataset);
        assert!(got.equals_missing(&want), "{dataset} differs on s3");
    }
    // Only committed files and the lake's own files are in the bucket.
    let m = again.manifest().expect("manifest");
    let data: BTreeSet<String> = Dataset::ALL
        .iter()
        .flat_map(|d| again.store().list(d.name()).expect("list"))
        .collect();
    assert_eq!(data, m.files.keys().cloned().collect::<BTreeSet<_>>());
}

fn writes_are_idempotent() {
    let lake = Lake::open(root("idempotent")).expect("open");
    let batches = Samples::generate(12, 200).batches().expect("batches");
    write_all(&lake, &batches);
    let before = lake.manifest().expect("manifest");
    let second = write_all(&lake, &batches);
    assert!(
        second.rows_added.values().all(|n| *n == 0),
        "{:?}",
        second.rows_added
    );
    let after = lake.manifest().expect("manifest");
    assert_eq!(after.files, before.files, "an equal write adds no file");
    for dataset in Dataset::ALL {
        assert_eq!(
            lake.row_count(dataset).expect("rows"),
            before.files_of(dataset).map(|(_, e)| e.rows).sum::<u64>()
        );
    }
}

fn verify_finds_a_missing_file() {
    let lake = Lake::open(root("verify")).expect("open");
    write_all(
        &lake,
        &Samples::generate(13, 200).batches().expect("batches"),
    );
    let report = lake.verify().expect("verify");
    assert!(report.is_ok(), "{:?}", report.problems);
    assert!(report.files_checked > 0);
    // An uncommitted file is reported apart, not as a problem: it may be another writer's.
    let stray = "swaps/chain=altchain/date=2024-01-01/part-99999999-0000-00000000.parquet";
    lake.store()
        .put(stray, b"not parquet")
        .expect("put a stray");
    let report = lake.verify().expect("verify");
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.unreferenced, vec![stray.to_owned()]);
    lake.store().delete(stray).expect("delete the stray");
    // A committed file deleted behind the lake's back is a problem.
    let m = lake.manifest().expect("manifest");
    let (victim, _) = m.files_of(Dataset::Swaps).next().expect("a swaps file");
    lake.store().delete(victim).expect("delete");
    let report = lake.verify().expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| matches!(p, Problem::MissingFile { path } if path == victim)),
        "{:?}",
        report.problems
    );
}

fn compact_keeps_every_row_and_removes_the_old_files() {
    let lake = Lake::open_with(root("compact"), small_file_options()).expect("open");
    let ids = commit_overlapping_small_files(&lake, 12, 200);
    let files_before = lake.manifest().expect("manifest").files.len();
    let report = lake.compact().expect("compact");
    assert!(report.files_removed > report.files_added, "{report:?}");
    assert_eq!(committed_ids(&lake), ids);
    let m = lake.manifest().expect("manifest");
    assert!(m.files.len() < files_before);
    let in_bucket: BTreeSet<String> = lake
        .store()
        .list("swaps")
        .expect("list")
        .into_iter()
        .collect();
    assert_eq!(in_bucket, m.files.keys().cloned().collect::<BTreeSet<_>>());
    assert!(lake.verify().expect("verify").is_ok());
}

fn a_streamed_file_is_uploaded_in_parts() {
    let lake = Lake::open(root("upload")).expect("open");
    let store = lake.store();
    let path = "swaps/chain=altchain/date=2024-01-01/part-00000001-0000-00000001.parquet";
    let temp = dexlake::lake::test_support::temp_name(path);
    // 40 MiB: more than two parts.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let data: Vec<u8> = (0..40 << 20).map(|_| rng.random()).collect();
    let mut f = store.create_temp(path).expect("create temp");
    f.write_all(&data).expect("write");
    f.sync_all().expect("sync");
    drop(f);
    assert_eq!(store.head(&temp).expect("head"), Some(data.len() as u64));
    assert_eq!(
        store.head(path).expect("head"),
        None,
        "not visible before the rename"
    );
    store.rename(&temp, path).expect("upload");
    assert_eq!(store.head(path).expect("head"), Some(data.len() as u64));
    assert!(
        store.get(path).expect("get") == data,
        "the uploaded bytes differ"
    );
    let file = store.open_read(path).expect("open by ranges");
    let middle =
        parquet::file::reader::ChunkReader::get_bytes(&file, 17 << 20, 1000).expect("a range");
    assert_eq!(&middle[..], &data[17 << 20..(17 << 20) + 1000]);
    store.delete(path).expect("delete");
}

fn run_child(kind: &str) {
    let lake_root = std::env::var(CHILD_LAKE_ENV).expect("the child's lake");
    if kind == "crash" {
        crash_writer_loop(&lake_root, ROWS_PER_COMMIT);
    }
    assert_eq!(kind, "race", "unknown child");
    // Commits 12 blocks from its start block, each with the block after it, and compacts after
    // every fourth: racing writers whose blocks overlap write many ids both, and compactions
    // race with commits.
    let opts = LakeOptions {
        compact_below_rows: 100_000,
        ..LakeOptions::default()
    };
    let lake = Lake::open_with(&lake_root, opts).expect("child opens the lake");
    let start: i64 = std::env::var(CHILD_START_ENV)
        .expect("start")
        .parse()
        .expect("a number");
    for k in start..start + 12 {
        let mut swaps = block_swaps(k, ROWS_PER_COMMIT);
        swaps.extend(block_swaps(k + 1, ROWS_PER_COMMIT));
        let mut tx = lake.transaction().expect("child tx");
        tx.write(
            Dataset::Swaps,
            convert::swaps_to_batch(&swaps).expect("batch"),
        )
        .expect("write");
        tx.set_state(format!("race/{start}"), serde_json::json!(k));
        tx.commit().expect("a racing commit lands, again if needed");
        if k % 4 == 3 {
            // A compaction that keeps losing its version to the other writer's commits gives
            // up with CommitConflict, leaving the committed rows as they are.
            match lake.compact() {
                Ok(_) | Err(dexlake::Error::CommitConflict { .. }) => {}
                Err(e) => panic!("a racing compaction failed otherwise: {e}"),
            }
        }
    }
}

fn child(kind: &str, lake: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.env(CHILD_ENV, kind)
        .env(CHILD_LAKE_ENV, lake)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

fn a_writer_killed_at_random_points_leaves_a_readable_lake() {
    let lake_root = root("crash");
    Lake::open(&lake_root).expect("open");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2025);
    let mut last_commits = 0;
    for round in 0..8 {
        let mut writer = child("crash", &lake_root)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the writer");
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1_500)));
        writer.kill().expect("SIGKILL");
        writer.wait().expect("reap");
        last_commits = check_after_kill(&lake_root, round, last_commits, ROWS_PER_COMMIT).1;
    }
    assert!(
        last_commits > 2,
        "the writer committed only {last_commits} times"
    );
    eprint!("{last_commits} commits survived 8 kills ... ");
}

fn two_racing_writers_lose_no_row_and_store_none_twice() {
    let lake_root = root("race");
    Lake::open(&lake_root).expect("open");
    // Blocks 0..13 and 6..19: blocks 6..13 are written by both.
    let writers: Vec<Child> = [0, 6]
        .into_iter()
        .map(|start| {
            child("race", &lake_root)
                .env(CHILD_START_ENV, start.to_string())
                .spawn()
                .expect("spawn a writer")
        })
        .collect();
    for w in writers {
        let out = w.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "a racing writer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let lake = Lake::open(&lake_root).expect("open");
    let want: Vec<i64> = (0..19 * ROWS_PER_COMMIT).collect();
    assert!(committed_ids(&lake) == want, "rows lost or stored twice");
    let report = lake.verify().expect("verify");
    assert!(report.is_ok(), "{:?}", report.problems);
    let m = lake.manifest().expect("manifest");
    assert_eq!(m.state.get("race/0"), Some(&serde_json::json!(11)));
    assert_eq!(m.state.get("race/6"), Some(&serde_json::json!(17)));
    // 24 commits landed, each on its own version (some after losing one to the other writer).
    assert!(m.version >= 24, "version {}", m.version);
}

/// Starts `dexlake sim` on loopback; returns it and its base URL.
fn start_sim() -> (Child, String) {
    let mut sim = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args([
            "sim",
            "--seed",
            "7",
            "--scale",
            "tiny",
            "--addr",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the simulator");
    let mut line = String::new();
    BufReader::new(sim.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the simulator's first line");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the simulator printed {line:?}"))
        .to_owned();
    (sim, url)
}

fn the_cli_syncs_bars_and_pnl_on_s3_as_on_a_folder() {
    let (mut sim, url) = start_sim();
    let catalog: serde_json::Value = serde_json::from_str(&dexlake_cli(&[
        "sim",
        "--seed",
        "7",
        "--scale",
        "tiny",
        "--catalog",
    ]))
    .expect("catalog JSON");
    let tokens: Vec<String> = catalog["altchain"]["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .take(2)
        .map(|t| t["address"].as_str().expect("address").to_owned())
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let folder = dir.path().join("lake");
    let folder = folder.to_str().expect("UTF-8 path").to_owned();
    let s3 = root("cli");
    for lake in [folder.as_str(), s3.as_str()] {
        for token in &tokens {
            for dataset in ["swaps", "trades"] {
                dexlake_cli(&[
                    "--lake",
                    lake,
                    "--base-url",
                    &url,
                    "--api-key",
                    "demo-key",
                    "sync",
                    dataset,
                    "--token",
                    token,
                ]);
            }
        }
        let verified = dexlake_cli(&["--lake", lake, "verify"]);
        assert!(verified.trim_end().ends_with("ok"), "{verified}");
    }
    let _ = sim.kill();
    let _ = sim.wait();
    let on_folder = Lake::open(&folder).expect("folder lake");
    let on_s3 = Lake::open(&s3).expect("s3 lake");
    for dataset in [Dataset::Swaps, Dataset::Trades] {
        let a = scanned_frame(&on_folder, dataset);
        assert!(a.height() > 0, "{dataset}: nothing synced");
        assert!(
            scanned_frame(&on_s3, dataset).equals_missing(&a),
            "{dataset}: the s3 lake holds other rows than the folder"
        );
    }
    for args in [
        &[
            "ohlcv",
            "--all-tokens",
            "--interval",
            "60",
            "--format",
            "csv",
        ][..],
        &["pnl", "--top", "20", "--format", "csv"][..],
    ] {
        let a = dexlake_cli(&[&["--lake", folder.as_str()][..], args].concat());
        let b = dexlake_cli(&[&["--lake", s3.as_str()][..], args].concat());
        assert!(a.lines().count() > 1, "{}: no rows", args[0]);
        assert_eq!(a, b, "{} differs between the folder and s3", args[0]);
    }
}

fn bad_roots_are_refused_clearly() {
    let err = Lake::open("gs://bucket/lake").expect_err("another scheme");
    assert!(err.to_string().contains("s3://"), "{err}");
    let err = Lake::open("s3://lake-test/a/../b").expect_err("a `..` prefix");
    assert!(err.to_string().contains("prefix"), "{err}");
    // A reading command never creates a lake.
    let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["--lake", "s3://lake-test/nothing-here", "verify"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a dexlake lake: s3://lake-test/nothing-here"),
        "{stderr}"
    );
    assert!(
        !Lake::exists("s3://lake-test/nothing-here").expect("exists"),
        "verify created a lake"
    );
    // Credentials never appear in an error.
    let err = Lake::open("s3://no-such-bucket-here/x").expect_err("no bucket");
    assert!(!err.to_string().contains("test:test"), "{err}");
}

/// An entry deleted from the middle of the log is found by the one listing of the log (which
/// starts after the checkpoint) and refused by readers and writers, naming it; the repair
/// rebuilds the manifest from the objects, with every committed row.
fn a_log_missing_an_entry_is_refused_and_repaired() {
    let root = root("gap");
    let lake = Lake::open(&root).expect("open");
    for k in 0..4 {
        write_all(
            &lake,
            &[(
                Dataset::Swaps,
                convert::swaps_to_batch(&block_swaps(k, 50)).expect("batch"),
            )],
        );
    }
    let version = lake.manifest().expect("manifest").version;
    assert_eq!(version, 4);
    lake.store()
        .delete(&dexlake::lake::test_support::entry_path(2))
        .expect("delete log entry 2");
    let err = Lake::open(&root).expect_err("a gap is refused").to_string();
    assert!(
        err.contains("log entry 2 is missing") && err.contains("dexlake verify --repair"),
        "{err}"
    );
    let report = Lake::repair(&root).expect("repair");
    assert!(report.rebuilt);
    let repaired = Lake::open(&root).expect("open after the repair");
    assert_eq!(committed_ids(&repaired), (0..200).collect::<Vec<_>>());
    write_all(
        &repaired,
        &[(
            Dataset::Swaps,
            convert::swaps_to_batch(&block_swaps(4, 50)).expect("batch"),
        )],
    );
    let fresh = Lake::open(&root).expect("open");
    assert_eq!(committed_ids(&fresh), (0..250).collect::<Vec<_>>());
    assert!(fresh.verify().expect("verify").is_ok());
}
