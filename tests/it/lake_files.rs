//! Committed data files changed on disk after their commit, through the CLI and the library: a
//! file swapped for another valid Parquet file, a file whose data pages were overwritten while
//! its footer stayed intact, a file whose footer is garbage, and a missing file. Readers refuse
//! them naming the file, as a damaged lake (exit status 5, `ErrorKind::DamagedLake`); `verify`
//! (and `verify --deep` for damaged pages) lists them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use dexlake::ErrorKind;
use dexlake::lake::{Dataset, FileEntry, Lake, Problem, VerifyOptions, VerifyProgress};
use dexlake::query::LakeQuery as _;
use parquet::file::reader::{FileReader, SerializedFileReader};
use polars::prelude::*;

use crate::common::lake::bounded;

const TOKEN: &str = "T0000000000000000000000000000000000000000";
const WALLET: &str = "W0000000000000000000000000000000000000002";

/// Runs `dexlake --lake <lake> <args>`.
fn dexlake(lake: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(lake)
        .args(args)
        .output()
        .expect("the dexlake binary runs")
}

/// The exit status of a command that met a damaged lake.
const DAMAGED_LAKE: i32 = 5;

/// No control character but line ends, so no raw bytes of a file reach the terminal.
fn assert_printable(text: &str) {
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "raw control characters in {text:?}"
    );
}

/// The commands that read each dataset's files.
fn readers_of(dataset: Dataset) -> Vec<Vec<&'static str>> {
    match dataset {
        Dataset::Swaps => vec![
            vec!["ohlcv", "--all-tokens", "--interval", "3600"],
            vec!["price-stats", "--tokens", TOKEN],
            vec!["pnl", "--top", "3"],
        ],
        Dataset::Trades => vec![
            vec!["pnl", "--top", "3"],
            vec!["pnl", "--wallet", WALLET],
            vec!["token-metrics", "--token", TOKEN],
        ],
        Dataset::TokenProfiles => vec![vec!["search", "--request", "-"]],
        _ => Vec::new(),
    }
}

/// A fixture lake of every dataset (written by the CLI, two commits) in a new folder.
fn fixture_lake() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("lake");
    let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["fixture-lake", "--rows", "2000"])
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

/// The committed files of `dataset` (altchain only: the profiles search reads), in path order.
fn committed(root: &Path, dataset: Dataset) -> Vec<(String, FileEntry)> {
    let lake = Lake::open(root).expect("open");
    lake.manifest()
        .expect("manifest")
        .files_of(dataset)
        .filter(|(p, _)| p.contains("chain=altchain"))
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect()
}

/// Runs every reader of `dataset` with a search request on standard input where needed.
fn run_reader(root: &Path, args: &[&str]) -> Output {
    if args[0] != "search" {
        return dexlake(root, args);
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(root)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the dexlake binary runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(br#"{"limit": 3}"#)
            .expect("write the request");
    }
    child.wait_with_output().expect("dexlake ends")
}

fn assert_reader_refuses(root: &Path, args: &[&str], path: &str) {
    let out = run_reader(root, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(DAMAGED_LAKE),
        "dexlake {args:?}: {err}"
    );
    assert!(
        err.contains(path) && err.contains("dexlake verify"),
        "dexlake {args:?} does not name {path} and verify: {err}"
    );
    assert_printable(&err);
}

/// `path`'s rows re-encoded uncompressed by polars, keeping `rows` of them: another valid
/// Parquet file of the same columns.
fn reencoded(path: &Path, rows: usize) -> Vec<u8> {
    let file = std::fs::File::open(path).expect("open");
    let df = ParquetReader::new(file)
        .finish()
        .expect("polars reads the file");
    let mut df = df.head(Some(rows));
    let mut bytes = Vec::new();
    ParquetWriter::new(&mut bytes)
        .with_compression(ParquetCompression::Uncompressed)
        .finish(&mut df)
        .expect("polars writes the file");
    bytes
}

#[test]
fn a_committed_file_swapped_for_another_valid_file_is_refused_naming_it() {
    bounded(600, || {
        for dataset in [Dataset::Swaps, Dataset::Trades, Dataset::TokenProfiles] {
            // Another committed file of the dataset (other rows), then the same rows written
            // again uncompressed (same row count, another size).
            for same_rows in [false, true] {
                let (_dir, root) = fixture_lake();
                for args in readers_of(dataset) {
                    let out = run_reader(&root, &args);
                    assert!(out.status.success(), "{args:?} on the sound lake");
                }
                let files = committed(&root, dataset);
                let (target, entry) = &files[0];
                let replacement = match (same_rows, dataset) {
                    (true, _) => {
                        let bytes = reencoded(&root.join(target), entry.rows as usize);
                        assert_ne!(bytes.len() as u64, entry.bytes);
                        bytes
                    }
                    // The only other altchain profiles file would be another snapshot's.
                    (false, Dataset::TokenProfiles) => {
                        reencoded(&root.join(target), entry.rows as usize - 1)
                    }
                    (false, _) => {
                        let (other, _) = files
                            .iter()
                            .find(|(_, e)| e.rows != entry.rows)
                            .expect("a file of other rows");
                        std::fs::read(root.join(other)).expect("read")
                    }
                };
                std::fs::write(root.join(target), replacement).expect("swap");
                for args in readers_of(dataset) {
                    assert_reader_refuses(&root, &args, target);
                }
                // `verify` lists it.
                let out = dexlake(&root, &["verify"]);
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(!out.status.success(), "{text}");
                assert!(text.contains(target.as_str()), "{text}");
            }
        }
    });
}

/// Overwrites the pages of column `column` in row group 0 of the file at `path` with zeros,
/// leaving the file's size and footer as they were.
fn overwrite_pages(path: &Path, column: &str) {
    let reader = SerializedFileReader::new(std::fs::File::open(path).expect("open"))
        .expect("the footer reads");
    let group = reader.metadata().row_group(0);
    let chunk = group
        .columns()
        .iter()
        .find(|c| c.column_path().string() == column)
        .expect("the column");
    let (start, len) = chunk.byte_range();
    let mut bytes = std::fs::read(path).expect("read");
    let (start, len) = (start as usize, len as usize);
    bytes[start..start + len].fill(0);
    std::fs::write(path, bytes).expect("write");
}

#[test]
fn verify_deep_finds_a_file_whose_data_pages_were_overwritten() {
    bounded(600, || {
        let (_dir, root) = fixture_lake();
        let files = committed(&root, Dataset::Swaps);
        let target = &files[1].0;
        overwrite_pages(&root.join(target), "usd_amount_out");

        // The quick checks read the footers and the key columns only.
        let out = dexlake(&root, &["verify", "--quick"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );

        // The default check decodes every page and names the file; with `--deep` asked for,
        // its progress goes to stderr.
        for args in [&["verify"][..], &["verify", "--deep"]] {
            let out = dexlake(&root, args);
            let text = String::from_utf8_lossy(&out.stdout);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?}: {text}");
            assert!(
                text.contains(&format!("damaged pages in committed file {target}")),
                "{args:?}: {text}"
            );
            assert!(text.contains("1 problems"), "{args:?}: {text}");
            assert_eq!(
                err.contains("decoding pages"),
                args.len() == 2,
                "{args:?}: {err}"
            );
            assert_printable(&text);
        }

        // A reader of the column fails naming the file.
        let out = dexlake(&root, &["ohlcv", "--all-tokens", "--interval", "3600"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(DAMAGED_LAKE), "{err}");
        assert!(err.contains(target.as_str()), "{err}");

        // A reader through polars scans, whose errors name no file, names it too: the files'
        // pages are decoded once the read has failed.
        let trades = committed(&root, Dataset::Trades);
        let damaged_trades = &trades[1].0;
        let intact = std::fs::read(root.join(damaged_trades)).expect("read");
        overwrite_pages(&root.join(damaged_trades), "usd_amount");
        // (The PnL's own reader, row group by row group, names it in its error.)
        let out = dexlake(&root, &["pnl", "--top", "3"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(DAMAGED_LAKE), "{err}");
        assert!(err.contains(damaged_trades.as_str()), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        // So does a wallet's equity curve, through the same reader.
        let out = dexlake(&root, &["pnl", "--wallet", WALLET, "--performance"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(DAMAGED_LAKE), "{err}");
        assert!(err.contains(damaged_trades.as_str()), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        // The token metrics read the trades through a polars scan.
        let out = dexlake(&root, &["token-metrics", "--token", TOKEN]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(DAMAGED_LAKE), "{err}");
        assert!(
            err.contains(&format!(
                "the committed file {damaged_trades} is damaged or was replaced: damaged pages"
            )) && err.contains("dexlake verify"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert_printable(&err);
        std::fs::write(root.join(damaged_trades), intact).expect("restore");

        // The library: the same problem, and the progress of every file.
        let lake = Lake::open(&root).expect("open");
        let seen = Mutex::new(Vec::new());
        let report = lake
            .verify_with(&VerifyOptions { deep: true }, &|p: VerifyProgress| {
                seen.lock().expect("lock").push(p)
            })
            .expect("verify");
        assert!(
            matches!(&report.problems[..], [Problem::DamagedPages { path, .. }] if path == target),
            "{:?}",
            report.problems
        );
        let seen = seen.into_inner().expect("lock");
        let files = report.files_checked;
        assert_eq!(seen.len(), files + 1);
        assert_eq!(seen[0].files_done, 0);
        let last = seen.iter().max_by_key(|p| p.files_done).expect("progress");
        assert_eq!((last.files_done, last.bytes_done), (files, last.bytes));
        assert!(lake.verify().expect("verify").is_ok());
    });
}

/// Overwrites the last `n` bytes of the file at `path` (its footer and the magic `PAR1`) with
/// NULs, escape sequences and other control bytes, leaving its size as it was.
fn garble_footer(path: &Path, n: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    let len = bytes.len();
    let garbage = b"\0\x07\x1b[2J\x1b]0;x\x07\xff\xfe\x01\x02";
    for (i, b) in bytes[len - n..].iter_mut().enumerate() {
        *b = garbage[i % garbage.len()];
    }
    std::fs::write(path, bytes).expect("write");
}

#[test]
fn an_unreadable_file_is_named_with_its_bytes_escaped() {
    bounded(600, || {
        let (_dir, root) = fixture_lake();
        let mut damaged = Vec::new();
        for dataset in [Dataset::Swaps, Dataset::Trades, Dataset::TokenProfiles] {
            let (path, _) = committed(&root, dataset).remove(0);
            garble_footer(&root.join(&path), 40);
            damaged.push((dataset, path));
        }
        for (dataset, _) in &damaged {
            for args in readers_of(*dataset) {
                let out = run_reader(&root, &args);
                let err = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(DAMAGED_LAKE), "{args:?}: {err}");
                // Whichever damaged file a reader meets first is named.
                assert!(
                    damaged.iter().any(|(_, p)| err.contains(p.as_str())),
                    "{args:?} names no damaged file: {err}"
                );
                assert_printable(&err);
            }
        }
        // The library's error is of the damaged lake's kind, naming the file.
        let lake = Lake::open_existing(&root).expect("open");
        let e = lake.query().leaderboard(3).expect_err("a damaged lake");
        assert_eq!(e.kind(), ErrorKind::DamagedLake, "{e}");
        assert!(
            damaged
                .iter()
                .any(|(_, p)| e.to_string().contains(p.as_str())),
            "{e}"
        );
        let out = dexlake(&root, &["verify"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success());
        for (_, path) in &damaged {
            assert!(
                text.contains(&format!("unreadable committed file {path}")),
                "{text}"
            );
        }
        assert_printable(&text);
    });
}

#[test]
fn a_missing_committed_file_is_named_as_a_damaged_lake() {
    bounded(600, || {
        let (_dir, root) = fixture_lake();
        let mut missing = Vec::new();
        for dataset in [Dataset::Swaps, Dataset::Trades, Dataset::TokenProfiles] {
            let (path, _) = committed(&root, dataset).remove(0);
            std::fs::remove_file(root.join(&path)).expect("remove");
            missing.push((dataset, path));
        }
        for (dataset, path) in &missing {
            for args in readers_of(*dataset) {
                let out = run_reader(&root, &args);
                let err = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(DAMAGED_LAKE), "{args:?}: {err}");
                assert!(
                    missing.iter().any(|(_, p)| err.contains(p.as_str()))
                        && err.contains("it is missing")
                        && err.contains("dexlake verify"),
                    "{args:?} does not name a missing file ({path} or another): {err}"
                );
            }
        }
        let lake = Lake::open_existing(&root).expect("open");
        let e = lake
            .query()
            .tokens([TOKEN])
            .price_stats(None)
            .expect_err("a missing file");
        assert_eq!(e.kind(), ErrorKind::DamagedLake, "{e}");
    });
}
