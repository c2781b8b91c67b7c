//! The lake on an S3-compatible object store: a real server (moto in server mode, from the
//! project's `.venv`) started on loopback by this test.
//!
//! Round trips of every dataset, idempotent writes, verify, compact, a streamed file uploaded
//! in parts, a writer killed with SIGKILL at random points, two writers racing on one lake,
//! the CLI's sync, bars and PnL giving on `s3://` what they give on a folder, and reads by
//! range: bars of one token and a search fetch the footers and the column chunks they decode
//! (bounded by sizes computed from the files' footers), and a damaged or swapped object is
//! refused as the same file in a folder is.
//!
//! This test has its own `main` (`harness = false`): the server's address reaches the
//! library through the AWS variables of the environment, which are set once, before any
//! other thread runs. A server that cannot start fails the test, unless the caller sets
//! `DEXLAKE_SKIP_S3=1` (for a machine without the project's `.venv`): then it says so on
//! stderr and passes with no test run.

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
        Err(why) if std::env::var_os("DEXLAKE_SKIP_S3").is_some_and(|v| v == "1") => {
            eprintln!("s3: skipped every object-store test (DEXLAKE_SKIP_S3=1): {why}");
            return;
        }
        Err(why) => panic!(
            "the S3 server cannot start: {why} (`make venv` installs moto into .venv; \
             DEXLAKE_SKIP_S3=1 skips the object-store tests)"
        ),
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
            "compact_keeps_every_row_and_vacuum_removes_the_old_files",
            180,
            compact_keeps_every_row_and_vacuum_removes_the_old_files,
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
        (
            "bars_of_one_token_fetch_its_column_chunks_only",
            300,
            bars_of_one_token_fetch_its_column_chunks_only,
        ),
        (
            "a_search_fetches_the_leaves_it_reads_only",
            200,
            a_search_fetches_the_leaves_it_reads_only,
        ),
        (
            "a_damaged_or_swapped_object_is_refused_as_in_a_folder",
            200,
            a_damaged_or_swapped_object_is_refused_as_in_a_folder,
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

fn compact_keeps_every_row_and_vacuum_removes_the_old_files() {
    let lake = Lake::open_with(root("compact"), small_file_options()).expect("open");
    let ids = commit_overlapping_small_files(&lake, 12, 200);
    let files_before = lake.manifest().expect("manifest").files.len();
    let report = lake.compact().expect("compact");
    assert!(report.files_removed > report.files_added, "{report:?}");
    assert_eq!(committed_ids(&lake), ids);
    let m = lake.manifest().expect("manifest");
    assert!(m.files.len() < files_before);
    let in_bucket = || -> BTreeSet<String> {
        lake.store()
            .list("swaps")
            .expect("list")
            .into_iter()
            .collect()
    };
    // The replaced files stay for the older versions, until a vacuum.
    assert_eq!(
        in_bucket(),
        m.files.keys().chain(m.removed.keys()).cloned().collect()
    );
    assert!(lake.verify().expect("verify").is_ok());
    let vacuum = lake
        .vacuum(dexlake::lake::VacuumOptions {
            retain: std::time::Duration::ZERO,
            dry_run: false,
        })
        .expect("vacuum");
    assert_eq!(vacuum.files.len(), report.files_removed);
    let m = lake.manifest().expect("manifest");
    assert!(m.removed.is_empty());
    assert_eq!(
        in_bucket(),
        m.files.keys().cloned().collect::<BTreeSet<_>>()
    );
    assert_eq!(committed_ids(&lake), ids);
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
        crash_writer_loop(&lake_root, ROWS_PER_COMMIT, false);
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

/// Rows per row group of the lakes of the range tests: many row groups per file, so that a
/// read that needs a few of them is told from one that fetches the file.
const RANGE_TEST_ROW_GROUP_ROWS: usize = 2048;

/// A folder lake (in `dir`) and the lake at `s3_root`, both opened with row groups of
/// [`RANGE_TEST_ROW_GROUP_ROWS`] rows and given the same `batches`.
fn same_lake_twice(
    dir: &Path,
    s3_root: &str,
    batches: &[(Dataset, arrow_array::RecordBatch)],
) -> (Lake, Lake) {
    let options = LakeOptions {
        row_group_rows: RANGE_TEST_ROW_GROUP_ROWS,
        ..LakeOptions::default()
    };
    let folder = Lake::open_with(dir.join("lake"), options.clone()).expect("folder lake");
    let s3 = Lake::open_with(s3_root, options).expect("s3 lake");
    for lake in [&folder, &s3] {
        write_all(lake, batches);
    }
    (folder, s3)
}

/// A committed file's footer (its Parquet metadata) and the length of the footer in the file
/// (the Thrift metadata and its 8-byte tail).
fn footer_of(data: &bytes::Bytes) -> (parquet::file::metadata::ParquetMetaData, u64) {
    let tail: [u8; 8] = data[data.len() - 8..].try_into().expect("8 bytes");
    let length = u64::from(u32::from_le_bytes(tail[..4].try_into().expect("4 bytes"))) + 8;
    let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(data)
        .expect("a footer");
    (metadata, length)
}

/// The compressed size of the column chunks of row group `group` whose dotted leaf path starts
/// with one of `prefixes`.
fn chunk_bytes(
    metadata: &parquet::file::metadata::ParquetMetaData,
    group: usize,
    prefixes: &[&str],
) -> u64 {
    metadata
        .row_group(group)
        .columns()
        .iter()
        .filter(|c| {
            let path = c.column_path().string();
            prefixes
                .iter()
                .any(|p| path == *p || path.starts_with(&format!("{p}.")))
        })
        .map(|c| u64::try_from(c.compressed_size()).expect("a size"))
        .sum()
}

/// Whether a string column of row group `group` of a file holds `value`.
fn row_group_holds(data: &bytes::Bytes, group: usize, columns: &[&str], value: &str) -> bool {
    use arrow_array::cast::AsArray;
    let builder =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(data.clone())
            .expect("a reader");
    let indices: Vec<usize> = columns
        .iter()
        .map(|c| builder.schema().index_of(c).expect("a column"))
        .collect();
    let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder
        .with_row_groups(vec![group])
        .with_projection(mask)
        .build()
        .expect("a reader");
    reader.into_iter().any(|batch| {
        let batch = batch.expect("a batch");
        batch
            .columns()
            .iter()
            .any(|column| match column.data_type() {
                // The lake's string columns are plain `Utf8` (`lake::schema`).
                arrow_schema::DataType::Utf8 => {
                    column.as_string::<i32>().iter().any(|v| v == Some(value))
                }
                other => panic!("column of {other}, not strings"),
            })
    })
}

/// Each committed file of `dataset` of the lake at `root`, whole, read through a handle of its
/// own (so the reads are not counted by the handle under test).
fn committed_files(root: &str, dataset: Dataset) -> Vec<bytes::Bytes> {
    let lake = Lake::open_existing(root).expect("open");
    let manifest = lake.manifest().expect("manifest");
    manifest
        .files_of(dataset)
        .map(|(path, _)| bytes::Bytes::from(lake.store().get(path).expect("get")))
        .collect()
}

/// Bars of one token read, on `s3://`, the footers and the column chunks the reader needs (the
/// kind and token columns of every row group, the numbers of the row groups holding the token)
/// and not the rest of the files, within twice those sizes (computed from the footers); the
/// bars are those of the same lake in a folder.
fn bars_of_one_token_fetch_its_column_chunks_only() {
    use dexlake::analytics::ohlcv::{BarOptions, bars};
    use dexlake::analytics::{EventSource, Selection, TimeRange};

    let market = dexlake::sim::SyntheticMarket::generate(4, dexlake::sim::Scale::Small);
    let n = market.alt.swap_count().min(40_000) as u32;
    // The market's two months pressed into two days: larger files, of several row groups.
    let start = market.alt.swap(0).block_time;
    let swaps: Vec<_> = (0..n)
        .map(|i| {
            let mut s = market.alt.swap(i);
            s.block_time = start + (s.block_time - start) / 30;
            s
        })
        .collect();
    // The least active token with a few dozen swaps: in some row groups, not all.
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for s in &swaps {
        for t in [&s.token_address_in, &s.token_address_out] {
            *counts.entry(t.as_str()).or_default() += 1;
        }
    }
    let token = counts
        .iter()
        .filter(|(_, c)| **c >= 30)
        .min_by_key(|(t, c)| (**c, **t))
        .map(|(t, _)| (*t).to_owned())
        .expect("a token with swaps");
    let batch = convert::swaps_to_batch(&swaps).expect("batch");
    let dir = tempfile::tempdir().expect("temp dir");
    let s3_root = root("ranged-bars");
    let (folder, s3) = same_lake_twice(dir.path(), &s3_root, &[(Dataset::Swaps, batch)]);

    let selection = Selection::Token(token.clone());
    let read = |lake: &Lake| {
        bars(
            lake,
            EventSource::Swaps,
            &selection,
            TimeRange::default(),
            &BarOptions::default(),
        )
        .expect("bars")
    };
    let want = read(&folder);
    assert!(want.height() > 0, "the token has no bars");
    let reader = Lake::open_existing(&s3_root).expect("open the s3 lake");
    reader
        .manifest()
        .expect("the manifest, read before counting");
    let before = reader.transfer_stats();
    let got = read(&reader);
    let fetched = reader.transfer_stats().since(before);
    assert!(got.equals_missing(&want), "the bars differ on s3");

    // What the reader needs, from the files' footers.
    const SIDES: [&str; 3] = ["swap_type", "token_address_in", "token_address_out"];
    const NUMBERS: [&str; 9] = [
        "id",
        "block_slot",
        "block_time",
        "token_amount_in",
        "token_amount_out",
        "token_price_in",
        "token_price_out",
        "usd_amount_in",
        "usd_amount_out",
    ];
    let (mut needed, mut total, mut groups, mut holding) = (0u64, 0u64, 0usize, 0usize);
    for data in committed_files(&s3_root, Dataset::Swaps) {
        let (metadata, footer) = footer_of(&data);
        needed += footer;
        total += data.len() as u64;
        for g in 0..metadata.num_row_groups() {
            groups += 1;
            needed += chunk_bytes(&metadata, g, &SIDES);
            if row_group_holds(&data, g, &SIDES[1..], &token) {
                holding += 1;
                needed += chunk_bytes(&metadata, g, &NUMBERS);
            }
        }
    }
    eprint!(
        "{} bytes in {} GETs for {needed} bytes needed of {total} ({holding} of {groups} row groups hold the token) ... ",
        fetched.get_bytes, fetched.get_requests
    );
    assert!(
        fetched.get_bytes <= 2 * needed,
        "fetched {} bytes, more than twice the {needed} bytes of the footers and the column chunks read (files: {total} bytes)",
        fetched.get_bytes
    );
    assert!(
        groups > holding,
        "the token is in every row group: no test of skipping"
    );
    drop(s3);
}

/// A search on `s3://` fetches the footer, the leaves its filter and sort read, and the page's
/// columns of the row groups holding the page, within twice their sizes; the page is the
/// folder's.
fn a_search_fetches_the_leaves_it_reads_only() {
    use dexlake::analytics::screener::{ProfileSnapshot, search};
    use dexlake::api::models::{AltTokenProfile, Market, TimeWindow, TokenMetadata, WindowMetrics};
    use dexlake::api::profile_query::SearchRequest;

    let fetched_at = chrono::DateTime::from_timestamp(1_748_736_000, 0).expect("a time");
    let window = |i: usize, scale: f64| WindowMetrics {
        volume: Some(scale * ((i * 7919) % 10_007) as f64),
        trade_count: Some((i % 97) as i64),
        buy_count: Some((i % 13) as i64),
        sell_count: Some((i % 31) as i64),
        ..WindowMetrics::default()
    };
    let profiles: Vec<AltTokenProfile> = (0..6000)
        .map(|i| AltTokenProfile {
            updated_at: fetched_at,
            synced_at: fetched_at,
            token_address: format!("Tok{i:06}{}", "x".repeat(30)),
            labels: Some(vec![format!("label-{}", i % 17)]),
            matched_labels: None,
            dynamic_labels: Vec::new(),
            metadata: Some(TokenMetadata {
                name: Some(format!("Token number {i} of the search test")),
                symbol: Some(format!("T{i}")),
                ..TokenMetadata::default()
            }),
            market: Some(Market {
                liquidity: Some(i as f64 * 3.5),
                price: Some(1.0 + i as f64 / 1000.0),
                ..Market::default()
            }),
            metrics: ["5m", "1h", "6h", "1d", "7d"]
                .iter()
                .enumerate()
                .map(|(k, w)| (TimeWindow::from_wire(w), window(i + k, 1.0 + k as f64)))
                .collect(),
        })
        .collect();
    let batch = convert::alt_profiles_to_batch(&profiles, fetched_at).expect("batch");
    let dir = tempfile::tempdir().expect("temp dir");
    let s3_root = root("ranged-search");
    same_lake_twice(dir.path(), &s3_root, &[(Dataset::TokenProfiles, batch)]);
    let request: SearchRequest = serde_json::from_value(serde_json::json!({
        "filter": {"metrics.1h.volume": {"$gt": 9000}},
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
        "limit": 5,
    }))
    .expect("request");
    let folder = Lake::open_existing(dir.path().join("lake")).expect("folder");
    let want = search(&folder, &request, ProfileSnapshot::Latest).expect("search");
    assert_eq!(want.data.len(), 5, "{want:?}");
    let reader = Lake::open_existing(&s3_root).expect("open the s3 lake");
    reader
        .manifest()
        .expect("the manifest, read before counting");
    let before = reader.transfer_stats();
    let got = search(&reader, &request, ProfileSnapshot::Latest).expect("search on s3");
    let fetched = reader.transfer_stats().since(before);
    assert_eq!(got, want, "the page differs on s3");

    let page: Vec<String> = want
        .data
        .iter()
        .map(|p| p["token_address"].as_str().expect("an address").to_owned())
        .collect();
    let (mut needed, mut total) = (0u64, 0u64);
    for data in committed_files(&s3_root, Dataset::TokenProfiles) {
        let (metadata, footer) = footer_of(&data);
        needed += footer;
        total += data.len() as u64;
        for g in 0..metadata.num_row_groups() {
            needed += chunk_bytes(&metadata, g, &["metrics.1h.volume", "token_address"]);
            if page
                .iter()
                .any(|a| row_group_holds(&data, g, &["token_address"], a))
            {
                needed += chunk_bytes(&metadata, g, &["updated_at", "synced_at", "fetched_at"]);
            }
        }
    }
    eprint!(
        "{} bytes in {} GETs for {needed} bytes needed of {total} ... ",
        fetched.get_bytes, fetched.get_requests
    );
    assert!(
        fetched.get_bytes <= 2 * needed,
        "fetched {} bytes, more than twice the {needed} bytes of the footers and the leaves read (files: {total} bytes)",
        fetched.get_bytes
    );
}

/// A committed object replaced by another data file, or damaged in place, is refused by the
/// readers with the error the same file gives in a folder (its row count or size against the
/// manifest, or the Parquet reader's fault), naming it.
fn a_damaged_or_swapped_object_is_refused_as_in_a_folder() {
    use dexlake::analytics::ohlcv::{BarOptions, bars};
    use dexlake::analytics::{EventSource, Selection, TimeRange};

    // Three days: a file a day, of different sizes.
    let swaps = block_swaps(0, 5000);
    let batch = convert::swaps_to_batch(&swaps).expect("batch");
    let dir = tempfile::tempdir().expect("temp dir");
    let s3_root = root("swapped");
    let (folder, s3) = same_lake_twice(dir.path(), &s3_root, &[(Dataset::Swaps, batch)]);
    // Each lake's two first files (the same days; their names differ).
    let files = |lake: &Lake| -> (String, String) {
        let manifest = lake.manifest().expect("manifest");
        let mut paths: Vec<String> = manifest
            .files_of(Dataset::Swaps)
            .map(|(p, _)| p.clone())
            .collect();
        paths.sort();
        assert!(paths.len() >= 2, "one file a day: {paths:?}");
        (paths[0].clone(), paths[1].clone())
    };
    let lakes = [(&folder, files(&folder)), (&s3, files(&s3))];
    // The error of bars over every file, the lake's root and the changed file's name replaced.
    let error = |lake: &Lake, path: &str| {
        let text = bars(
            lake,
            EventSource::Swaps,
            &Selection::AllTokens,
            TimeRange::default(),
            &BarOptions::default(),
        )
        .expect_err("a changed file is refused")
        .to_string();
        assert!(text.contains(path), "{text}");
        text.replace(&lake.root().display().to_string(), "<lake>")
            .replace(path, "<file>")
    };
    let (_, (first, second)) = &lakes[0];
    let original = folder.store().get(first).expect("the file");
    let other = folder.store().get(second).expect("the other file");
    let mut damaged = original.clone();
    let at = damaged.len() - 20;
    damaged[at..at + 8].copy_from_slice(b"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8");
    for (what, data) in [
        // Swapped for another file of the lake: its row count tells.
        ("swapped", &other[..]),
        // Of the same size, its footer damaged.
        ("damaged", &damaged[..]),
        // Shorter by a byte.
        ("truncated", &original[..original.len() - 1]),
    ] {
        let texts: Vec<String> = lakes
            .iter()
            .map(|(lake, (first, _))| {
                lake.store().put(first, data).expect("replace the file");
                error(lake, first)
            })
            .collect();
        assert_eq!(texts[1], texts[0], "s3 refuses a {what} file otherwise");
        if what == "swapped" {
            assert!(texts[0].contains("dexlake verify"), "{}", texts[0]);
        }
        eprint!("{what}: {} ... ", texts[0]);
    }
}
