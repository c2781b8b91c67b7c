//! The lake against real Parquet files in temporary folders: round trips of every dataset,
//! idempotent writes, the writer lock, verify, compact, row-group pruning, and a writer killed
//! with SIGKILL at random points.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arrow_select::concat::concat_batches;
use chrono::{Duration as ChronoDuration, TimeZone, Utc};
use common::lake::{
    batches_of, bounded, check_after_kill, commit_overlapping_small_files, committed_ids,
    crash_writer_loop, expected_frame, scanned_frame, small_file_options, write_all,
};
use dexlake::Error;
use dexlake::api::models::Swap;
use dexlake::lake::sample::Samples;
use dexlake::lake::test_support as support;
use dexlake::lake::{Dataset, Lake, LakeOptions, Problem, convert, docs};
use polars::prelude::*;
use rand::{Rng, SeedableRng};

#[test]
fn every_dataset_round_trips_through_the_lake() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let samples = Samples::generate(11, 300);
        let batches = samples.batches().expect("batches");
        let summary = write_all(&lake, &batches);
        assert_eq!(summary.rows_added, samples.row_counts());

        for dataset in Dataset::ALL {
            let expected = expected_frame(dataset, &batches_of(&batches, dataset));
            let got = scanned_frame(&lake, dataset);
            assert_eq!(got.height(), expected.height(), "{dataset} row count");
            assert!(
                got.equals_missing(&expected),
                "{dataset}: lake scan differs from the input\n{got}\n{expected}"
            );
            assert_eq!(
                lake.row_count(dataset).expect("row count"),
                expected.height() as u64
            );
        }

        // The hive columns carry the partition: chain from chain_id, date from the time column.
        let prices = lake
            .scan(Dataset::Prices)
            .expect("scan")
            .select([
                col("chain"),
                col("chain_id"),
                col("date"),
                col("fetched_at"),
            ])
            .collect()
            .expect("collect");
        let chain = prices.column("chain").expect("chain").str().expect("str");
        let chain_id = prices.column("chain_id").expect("id").i64().expect("i64");
        for i in 0..prices.height() {
            let want = match chain_id.get(i) {
                Some(id) => format!("evm-{id}"),
                None => "altchain".to_owned(),
            };
            assert_eq!(chain.get(i), Some(want.as_str()));
        }
        assert_eq!(
            prices.column("date").expect("date").dtype(),
            &DataType::Date
        );

        // Values reach the models' numbers, also inside structs.
        let swaps = lake
            .scan(Dataset::Swaps)
            .expect("scan")
            .sort(["id"], SortMultipleOptions::default())
            .select([col("id"), col("block_time"), col("swap_type")])
            .collect()
            .expect("collect");
        let mut models = samples.swaps.clone();
        models.sort_by_key(|s| s.id);
        let ids: Vec<i64> = swaps
            .column("id")
            .expect("id")
            .i64()
            .expect("i64")
            .into_no_null_iter()
            .collect();
        assert_eq!(ids, models.iter().map(|s| s.id).collect::<Vec<_>>());
        let times = swaps
            .column("block_time")
            .expect("time")
            .datetime()
            .expect("datetime");
        assert_eq!(times.time_zone().as_ref().map(|z| z.as_str()), Some("UTC"));
        assert_eq!(
            times.physical().get(0),
            Some(models[0].block_time.timestamp_micros())
        );
        let types = swaps.column("swap_type").expect("type").str().expect("str");
        assert!(types.iter().any(|t| t == Some("future_kind")));

        let profiles = lake
            .scan(Dataset::TokenProfiles)
            .expect("scan")
            .filter(col("token_address").eq(lit(samples.alt_profiles[0].token_address.as_str())))
            .select([col("metrics")
                .struct_()
                .field_by_name("7d")
                .struct_()
                .field_by_name("volume")])
            .collect()
            .expect("collect");
        let want = samples.alt_profiles[0].metrics[&dexlake::api::models::TimeWindow::D7].volume;
        assert_eq!(
            profiles
                .column("volume")
                .expect("volume")
                .f64()
                .expect("f64")
                .get(0),
            want
        );
    });
}

#[test]
fn writing_the_same_records_twice_leaves_one_copy() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let samples = Samples::generate(3, 120);
        let batches = samples.batches().expect("batches");
        write_all(&lake, &batches);
        let files = lake.manifest().expect("manifest").files.len();

        // Again, in another transaction: nothing new.
        let again = write_all(&lake, &batches);
        assert_eq!(again.files_added, 0);
        assert!(again.rows_added.is_empty(), "{:?}", again.rows_added);
        assert_eq!(lake.manifest().expect("manifest").files.len(), files);

        // Duplicates inside one transaction and one batch, mixed with new records.
        let mut extra: Vec<Swap> = samples.swaps[..10].to_vec();
        let mut fresh = samples.swaps[0].clone();
        fresh.id = 42;
        extra.push(fresh.clone());
        extra.push(fresh);
        let b = convert::swaps_to_batch(&extra).expect("batch");
        let mut tx = lake.transaction().expect("tx");
        tx.write(Dataset::Swaps, b.clone()).expect("write");
        tx.write(Dataset::Swaps, b).expect("write");
        let s = tx.commit().expect("commit");
        assert_eq!(s.rows_added.get(&Dataset::Swaps), Some(&1));
        for dataset in Dataset::ALL {
            // No sample of the bars, which are computed, not fetched.
            let mut want = samples.row_counts().get(&dataset).copied().unwrap_or(0);
            if dataset == Dataset::Swaps {
                want += 1;
            }
            assert_eq!(lake.row_count(dataset).expect("rows"), want, "{dataset}");
        }
        let report = lake.verify().expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
    });
}

#[test]
fn a_revised_candle_replaces_the_committed_one() {
    use dexlake::lake::sample::{CANDLE_INTERVAL, CANDLE_TOKEN};
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let samples = Samples::generate(5, 60);
        let candles = samples.candles.clone();
        let batch = |c: &[dexlake::api::models::Candle]| {
            convert::candles_to_batch(Some(CANDLE_TOKEN), None, CANDLE_INTERVAL, c).expect("batch")
        };
        let first = write_all(&lake, &[(Dataset::Candles, batch(&candles))]);
        assert_eq!(first.rows_added[&Dataset::Candles], candles.len() as u64);
        let files = lake.manifest().expect("manifest").files;

        // The same candles again: nothing is added and no file is rewritten.
        let again = write_all(&lake, &[(Dataset::Candles, batch(&candles))]);
        assert!(
            again.rows_added.values().all(|n| *n == 0),
            "{:?}",
            again.rows_added
        );
        assert_eq!(again.files_added, 0);
        assert_eq!(lake.manifest().expect("manifest").files, files);

        // The newest candle was revised and one more arrived: the revision wins, one copy each.
        let mut revised = candles[candles.len() - 1].clone();
        revised.close += 1.5;
        revised.high = revised.high.max(revised.close);
        revised.count += 3;
        let mut newer = revised.clone();
        newer.timestamp += ChronoDuration::seconds(CANDLE_INTERVAL);
        let s = write_all(
            &lake,
            &[(Dataset::Candles, batch(&[revised.clone(), newer]))],
        );
        assert_eq!(
            s.rows_added[&Dataset::Candles],
            1,
            "only the new candle is new"
        );
        assert_eq!(
            lake.row_count(Dataset::Candles).expect("rows"),
            candles.len() as u64 + 1
        );
        let got = lake
            .scan(Dataset::Candles)
            .expect("scan")
            .filter(
                col("timestamp").eq(lit(revised.timestamp.timestamp_micros()).cast(
                    DataType::Datetime(
                        TimeUnit::Microseconds,
                        Some(polars::prelude::TimeZone::UTC),
                    ),
                )),
            )
            .collect()
            .expect("collect");
        assert_eq!(got.height(), 1);
        let close = got
            .column("close")
            .expect("close")
            .f64()
            .expect("f64")
            .get(0);
        assert_eq!(close, Some(revised.close));
        let report = lake.verify().expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
    });
}

#[test]
fn state_commits_with_the_data_and_a_dropped_transaction_leaves_nothing() {
    bounded(60, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let samples = Samples::generate(5, 50);
        {
            let mut tx = lake.transaction().expect("tx");
            tx.write(
                Dataset::Swaps,
                convert::swaps_to_batch(&samples.swaps).expect("batch"),
            )
            .expect("write");
            tx.set_state("swaps/w1/cursor", serde_json::json!("c1"));
            // Dropped without commit.
        }
        assert_eq!(lake.row_count(Dataset::Swaps).expect("rows"), 0);
        assert_eq!(lake.state("swaps/w1/cursor").expect("state"), None);

        let mut tx = lake.transaction().expect("tx");
        tx.write(
            Dataset::Swaps,
            convert::swaps_to_batch(&samples.swaps).expect("batch"),
        )
        .expect("write");
        tx.set_state("swaps/w1/cursor", serde_json::json!("c1"));
        tx.set_state("swaps/w2/cursor", serde_json::json!({"slot": 7}));
        tx.set_state("trades/w1/cursor", serde_json::json!(null));
        tx.commit().expect("commit");
        assert_eq!(lake.row_count(Dataset::Swaps).expect("rows"), 50);
        assert_eq!(
            lake.state("swaps/w1/cursor").expect("state"),
            Some(serde_json::json!("c1"))
        );
        let swaps = lake.states("swaps/").expect("states");
        assert_eq!(swaps.len(), 2);
        assert_eq!(swaps["swaps/w2/cursor"], serde_json::json!({"slot": 7}));
        let report = lake.verify().expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
    });
}

#[test]
fn a_second_writer_waits_then_fails_clearly_and_writers_serialise() {
    bounded(60, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let quick = LakeOptions {
            lock_timeout: Duration::from_millis(200),
            ..LakeOptions::default()
        };
        let a = Lake::open(dir.path()).expect("open");
        let b = Lake::open_with(dir.path(), quick).expect("open");
        let tx = a.transaction().expect("first writer");
        let started = Instant::now();
        match b.transaction() {
            Err(Error::LakeLocked { path }) => assert!(path.ends_with("_dexlake/lock")),
            other => panic!("expected LakeLocked, got {other:?}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop(tx);
        assert!(b.transaction().is_ok(), "the lock is free again");

        // Four threads commit disjoint records at once: all land, none twice.
        let samples = Samples::generate(9, 400);
        let root = dir.path().to_path_buf();
        let handles: Vec<_> = samples
            .swaps
            .chunks(100)
            .map(|chunk| {
                let chunk = chunk.to_vec();
                let root = root.clone();
                std::thread::spawn(move || {
                    let lake = Lake::open(&root).expect("open");
                    let mut tx = lake.transaction().expect("tx");
                    tx.write(
                        Dataset::Swaps,
                        convert::swaps_to_batch(&chunk).expect("batch"),
                    )
                    .expect("write");
                    tx.commit().expect("commit")
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer thread");
        }
        assert_eq!(a.row_count(Dataset::Swaps).expect("rows"), 400);
        let report = a.verify().expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
    });
}

#[test]
fn verify_reports_every_kind_of_damage() {
    bounded(60, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let samples = Samples::generate(13, 200);
        write_all(&lake, &samples.batches().expect("batches"));
        assert!(lake.verify().expect("verify").is_ok());

        let manifest = lake.manifest().expect("manifest");
        let swap_files: Vec<String> = manifest
            .files_of(Dataset::Swaps)
            .map(|(p, _)| p.clone())
            .collect();
        let trade_files: Vec<String> = manifest
            .files_of(Dataset::Trades)
            .map(|(p, _)| p.clone())
            .collect();
        let root = lake.root().to_path_buf();
        let abs = |p: &str| root.join(p);

        // Missing, unreadable, untracked.
        std::fs::remove_file(abs(&swap_files[0])).expect("delete");
        std::fs::write(abs(&swap_files[1]), b"not parquet at all").expect("corrupt");
        let stray = swap_files[2].replace("part-", "stray-");
        std::fs::copy(abs(&swap_files[2]), abs(&stray)).expect("copy");
        // A trades file registered a second time under another name: duplicate keys. A swaps
        // file registered as trades: schema mismatch.
        let mut m = manifest.clone();
        let dup = trade_files[0].replace("part-", "dup-");
        std::fs::copy(abs(&trade_files[0]), abs(&dup)).expect("copy");
        m.files
            .insert(dup.clone(), m.files[&trade_files[0]].clone());
        let wrong = trade_files[1].replace("part-", "wrong-");
        std::fs::copy(abs(&swap_files[3]), abs(&wrong)).expect("copy");
        let mut entry = m.files[&swap_files[3]].clone();
        entry.dataset = Dataset::Trades;
        m.files.insert(wrong.clone(), entry);
        replace_manifest(&root, &m);

        let report = lake.verify().expect("verify");
        let p = &report.problems;
        assert!(!report.is_ok());
        assert!(p.contains(&Problem::MissingFile {
            path: swap_files[0].clone()
        }));
        assert!(
            p.iter().any(
                |x| matches!(x, Problem::UnreadableFile { path, .. } if *path == swap_files[1])
            )
        );
        assert!(p.contains(&Problem::UntrackedFile { path: stray }));
        assert!(p.iter().any(|x| matches!(x, Problem::DuplicateKeys { partition, .. } if dup.starts_with(partition.as_str()))));
        assert!(
            p.iter()
                .any(|x| matches!(x, Problem::SchemaMismatch { path, .. } if *path == wrong))
        );

        // The CLI exits non-zero on the damaged lake.
        let status = Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .args(["--lake"])
            .arg(lake.root())
            .arg("verify")
            .stdout(Stdio::null())
            .status()
            .expect("run dexlake verify");
        assert!(!status.success());
    });
}

#[test]
fn compact_merges_small_files_without_losing_or_duplicating_rows() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let samples = Samples::generate(17, 600);
        let batches = samples.batches().expect("batches");
        // Many small commits: every dataset batch split into slices.
        for (d, b) in &batches {
            let step = (b.num_rows() / 5).max(1);
            let mut off = 0;
            while off < b.num_rows() {
                let len = step.min(b.num_rows() - off);
                write_all(&lake, &[(*d, b.slice(off, len))]);
                off += len;
            }
        }
        let before: BTreeMap<Dataset, DataFrame> = Dataset::ALL
            .iter()
            .map(|d| (*d, scanned_frame(&lake, *d)))
            .collect();
        let files_before = lake.manifest().expect("manifest").files.len();
        let report = lake.compact().expect("compact");
        assert!(report.partitions > 0);
        let files_after = lake.manifest().expect("manifest").files.len();
        assert_eq!(
            files_after,
            files_before - report.files_removed + report.files_added
        );
        assert!(files_after < files_before);
        for (d, df) in &before {
            assert!(scanned_frame(&lake, *d).equals_missing(df), "{d} changed");
            assert_eq!(
                *df,
                expected_frame(*d, &batches_of(&batches, *d)),
                "{d} lost or gained rows"
            );
        }
        // Old files are gone from disk too, and a second compaction has nothing to do.
        let report2 = lake.compact().expect("compact again");
        assert_eq!(report2.partitions, 0);
        let v = lake.verify().expect("verify");
        assert!(v.is_ok(), "{:?}", v.problems);
    });
}

#[test]
fn files_are_sorted_with_row_group_statistics_so_time_ranges_prune() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let opts = LakeOptions {
            row_group_rows: 500,
            ..LakeOptions::default()
        };
        let lake = Lake::open_with(dir.path(), opts).expect("open");
        let samples = Samples::generate(19, 6_000);
        write_all(
            &lake,
            &[(
                Dataset::Swaps,
                convert::swaps_to_batch(&samples.swaps).expect("batch"),
            )],
        );
        let manifest = lake.manifest().expect("manifest");
        for (path, entry) in manifest.files_of(Dataset::Swaps) {
            let file = std::fs::File::open(lake.root().join(path)).expect("open file");
            let reader =
                parquet::file::reader::SerializedFileReader::new(file).expect("parquet reader");
            use parquet::file::reader::FileReader;
            let meta = reader.metadata();
            assert_eq!(
                meta.num_row_groups() as u64,
                entry.rows.div_ceil(500),
                "{path}: row groups of 500 rows"
            );
            let idx = meta
                .file_metadata()
                .schema_descr()
                .columns()
                .iter()
                .position(|c| c.name() == "block_time")
                .expect("block_time column");
            let mut last_max = i64::MIN;
            for rg in meta.row_groups() {
                let stats = rg.column(idx).statistics().expect("row-group statistics");
                let (min, max) = match stats {
                    parquet::file::statistics::Statistics::Int64(s) => {
                        (*s.min_opt().expect("min"), *s.max_opt().expect("max"))
                    }
                    other => panic!("block_time statistics of type {other:?}"),
                };
                assert!(min >= last_max, "row groups of {path} overlap in time");
                last_max = max;
            }
        }

        // A time-range query returns exactly the rows in the range.
        let lo = Utc
            .with_ymd_and_hms(2024, 3, 2, 6, 0, 0)
            .single()
            .expect("time");
        let hi = lo + ChronoDuration::hours(3);
        let to_lit = |t: chrono::DateTime<Utc>| {
            lit(t.timestamp_micros()).cast(DataType::Datetime(
                TimeUnit::Microseconds,
                Some(polars::prelude::TimeZone::UTC),
            ))
        };
        let got = lake
            .scan(Dataset::Swaps)
            .expect("scan")
            .filter(
                col("block_time")
                    .gt_eq(to_lit(lo))
                    .and(col("block_time").lt(to_lit(hi))),
            )
            .select([col("id")])
            .collect()
            .expect("collect");
        let want: BTreeSet<i64> = samples
            .swaps
            .iter()
            .filter(|s| s.block_time >= lo && s.block_time < hi)
            .map(|s| s.id)
            .collect();
        let got: BTreeSet<i64> = got
            .column("id")
            .expect("id")
            .i64()
            .expect("i64")
            .into_no_null_iter()
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want);

        // A filter on the hive `date` column selects whole partitions.
        let day = lo.date_naive();
        let n = lake
            .scan(Dataset::Swaps)
            .expect("scan")
            .filter(col("date").eq(lit(day)))
            .select([col("id")])
            .collect()
            .expect("collect")
            .height();
        let want = samples
            .swaps
            .iter()
            .filter(|s| s.block_time.date_naive() == day)
            .count();
        assert!(want > 0);
        assert_eq!(n, want);
    });
}

#[test]
fn scans_of_empty_datasets_have_the_full_schema() {
    bounded(60, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        for d in Dataset::ALL {
            let df = lake.scan(d).expect("scan").collect().expect("collect");
            assert_eq!(df.height(), 0);
            let names: Vec<String> = df
                .get_column_names()
                .iter()
                .map(|n| n.to_string())
                .collect();
            assert_eq!(names, support::scan_columns(d), "{d}");
        }
    });
}

#[test]
fn a_lake_folder_with_an_equals_sign_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    match Lake::open(dir.path().join("year=2024")) {
        Err(Error::Lake { message, .. }) => assert!(message.contains('=')),
        other => panic!("expected a lake error, got {other:?}"),
    }
}

#[test]
fn batches_of_the_wrong_schema_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("open");
    let samples = Samples::generate(1, 10);
    let trades = convert::trades_to_batch(&samples.trades).expect("batch");
    let mut tx = lake.transaction().expect("tx");
    assert!(matches!(
        tx.write(Dataset::Swaps, trades),
        Err(Error::Lake { .. })
    ));
}

#[test]
fn docs_datasets_md_matches_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/datasets.md");
    let text = std::fs::read_to_string(&path).expect("docs/datasets.md exists");
    assert!(
        text == docs::markdown(),
        "docs/datasets.md is out of date; regenerate it with `dexlake schema --markdown > docs/datasets.md`"
    );
}

// ---------------------------------------------------------------------------------------------
// Crash test: a child writer (this test binary, re-executed) is killed at random points.

const CRASH_ENV: &str = "DEXLAKE_CRASH_CHILD_LAKE";
/// Set for a child whose commits merge the small files of the days they write.
const CRASH_MERGE_ENV: &str = "DEXLAKE_CRASH_CHILD_MERGES";
const ROWS_PER_COMMIT: i64 = 1_500;

/// The child: commits forever, each commit adding the next id range, re-writing the previous
/// one (which must change nothing) and recording how many commits exist; compacts now and then.
#[test]
#[ignore = "run only as the crash test's child process"]
fn crash_writer_child() {
    if let Ok(root) = std::env::var(CRASH_ENV) {
        let merge = std::env::var_os(CRASH_MERGE_ENV).is_some();
        crash_writer_loop(&root, ROWS_PER_COMMIT, merge);
    }
}

#[test]
fn a_writer_killed_at_random_points_leaves_a_sound_lake() {
    killed_at_random_points(false);
}

#[test]
fn a_writer_merging_small_files_killed_at_random_points_leaves_a_sound_lake() {
    killed_at_random_points(true);
}

/// Kills the crash writer (its commits merging small files when `merge`) 20 times at random
/// points, checking the lake after each kill.
fn killed_at_random_points(merge: bool) {
    bounded(300, move || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        Lake::open(&root).expect("open");
        let exe = std::env::current_exe().expect("test binary");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2024);
        let mut last_commits = 0;
        let mut interrupted_commits = 0;
        for round in 0..20 {
            let mut child = Command::new(&exe)
                .args([
                    "--exact",
                    "lake::crash_writer_child",
                    "--ignored",
                    "--nocapture",
                ])
                .env(CRASH_ENV, &root)
                .envs(merge.then_some((CRASH_MERGE_ENV, "1")))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn child writer");
            std::thread::sleep(Duration::from_millis(rng.random_range(80..700)));
            // `Child::kill` sends SIGKILL on Unix.
            child.kill().expect("kill child");
            child.wait().expect("reap child");
            if root.join(support::JOURNAL_PATH).exists() {
                interrupted_commits += 1;
            }

            let (lake, commits) = check_after_kill(
                root.to_str().expect("UTF-8 temp path"),
                round,
                last_commits,
                ROWS_PER_COMMIT,
            );
            last_commits = commits;
            // No leftovers: every file on disk is committed, or retained for an older version
            // (replaced by a compaction, until a vacuum).
            let on_disk: BTreeSet<String> = lake
                .store()
                .list("swaps")
                .expect("list")
                .into_iter()
                .collect();
            let manifest = lake.manifest().expect("manifest");
            let kept: BTreeSet<String> = manifest
                .files
                .keys()
                .chain(manifest.removed.keys())
                .cloned()
                .collect();
            assert_eq!(on_disk, kept, "round {round}");
        }
        assert!(
            last_commits > 3,
            "the child committed only {last_commits} times"
        );
        if merge {
            let history = Lake::open(&root).expect("open").history().expect("history");
            assert!(
                history
                    .records
                    .iter()
                    .any(|c| c.operation == "write"
                        && c.datasets.values().any(|d| d.files_removed > 0)),
                "no commit merged small files"
            );
        }
        eprintln!("{last_commits} commits, {interrupted_commits} kills landed inside a commit");
    });
}

#[test]
fn a_hostile_journal_is_refused_and_deletes_nothing() {
    bounded(60, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let victim_dir = dir.path().join("victim");
        std::fs::create_dir(&victim_dir).expect("victim folder");
        let victim = victim_dir.join("data.txt");
        std::fs::write(&victim, b"precious").expect("victim file");
        let lake = Lake::open(&root).expect("open");
        write_all(&lake, &Samples::generate(5, 50).batches().expect("batches"));
        let committed = lake.manifest().expect("manifest").files.len();
        drop(lake);

        let journal = root.join(support::JOURNAL_PATH);
        for hostile in [
            "../victim/data.txt".to_owned(),
            "swaps/../../victim/data.txt".to_owned(),
            victim.to_str().expect("UTF-8 path").to_owned(),
            "_dexlake/manifest.json".to_owned(),
        ] {
            for member in ["add", "remove"] {
                let body =
                    serde_json::json!({"version": 99, "add": [], "remove": [], member: [hostile]});
                std::fs::write(&journal, body.to_string()).expect("journal");
                let err = Lake::open(&root).expect_err("a hostile journal is refused");
                let shown = err.to_string();
                assert!(matches!(err, Error::Lake { .. }), "{err:?}");
                assert!(
                    shown.contains("journal") && shown.contains("nothing was deleted"),
                    "{shown}"
                );
                assert_eq!(std::fs::read(&victim).expect("victim kept"), b"precious");
                assert!(journal.exists(), "the journal is kept for inspection");
                // `verify` does not say "ok" either.
                let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
                    .arg("--lake")
                    .arg(&root)
                    .arg("verify")
                    .output()
                    .expect("run dexlake verify");
                assert!(!out.status.success());
                assert!(String::from_utf8_lossy(&out.stderr).contains("journal"));
            }
        }
        std::fs::remove_file(&journal).expect("remove the journal");
        let lake = Lake::open(&root).expect("open");
        assert_eq!(lake.manifest().expect("manifest").files.len(), committed);
        assert!(lake.verify().expect("verify").is_ok());
    });
}

#[test]
fn a_missing_or_damaged_manifest_is_refused_and_repair_rebuilds_the_same_rows() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let lake = lake_with_state(
            &root,
            21,
            120,
            "sync/example",
            serde_json::json!({"cursor": "c1"}),
        );
        write_all(
            &lake,
            &Samples::generate(22, 120).batches().expect("batches"),
        );
        let committed = lake.manifest().expect("manifest");
        assert!(
            root.join(support::entry_path(committed.version)).exists(),
            "each commit is one log entry"
        );
        let frames: Vec<DataFrame> = Dataset::ALL
            .iter()
            .map(|d| scanned_frame(&lake, *d))
            .collect();
        let same_lake = |lake: &Lake| {
            let m = lake.manifest().expect("manifest");
            assert_eq!(
                m.files.keys().collect::<Vec<_>>(),
                committed.files.keys().collect::<Vec<_>>()
            );
            assert_eq!(m.state, committed.state, "the sync state is salvaged");
            for (d, frame) in Dataset::ALL.iter().zip(&frames) {
                assert!(scanned_frame(lake, *d).equals_missing(frame), "{d}");
            }
            assert!(lake.verify().expect("verify").is_ok());
        };
        let pointer = root.join(support::LAST_CHECKPOINT_PATH);

        // Missing: refused, by the open handle too; `verify --repair` rebuilds the same lake,
        // with the sync state read from the checkpoints and log entries left on disk.
        std::fs::remove_file(&pointer).expect("delete the manifest's pointer");
        let err = Lake::open(&root).expect_err("refused").to_string();
        assert!(
            err.contains("manifest is missing") && err.contains("verify --repair"),
            "{err}"
        );
        assert!(lake.scan(Dataset::Swaps).is_err());
        assert!(
            lake.transaction().is_err(),
            "no commit writes an empty manifest"
        );
        let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .arg("--lake")
            .arg(&root)
            .args(["verify", "--repair"])
            .output()
            .expect("run dexlake verify --repair");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("rebuilt the manifest"), "{stdout}");
        same_lake(&Lake::open(&root).expect("open after repair"));

        // Truncated, then garbage, then a damaged newest log entry: refused with a pointer to
        // the repair; a stray file that is not Parquet is reported and left alone.
        let stray = root.join("swaps/chain=altchain/date=2024-01-01/part-stray.parquet");
        std::fs::create_dir_all(stray.parent().expect("parent")).expect("folder");
        std::fs::write(&stray, b"not parquet").expect("stray");
        for damage in 0..3 {
            let text = std::fs::read(&pointer).expect("pointer");
            match damage {
                0 => std::fs::write(&pointer, &text[..text.len() / 2]),
                1 => std::fs::write(&pointer, b"\x00garbage"),
                _ => {
                    // A commit of state alone, then its entry damaged.
                    let lake = Lake::open(&root).expect("open");
                    let mut tx = lake.transaction().expect("transaction");
                    tx.set_state("sync/other", serde_json::json!(1));
                    tx.commit().expect("commit");
                    let version = lake.manifest().expect("manifest").version;
                    std::fs::write(root.join(support::entry_path(version)), b"{\"vers")
                }
            }
            .expect("damage the manifest");
            let err = Lake::open(&root).expect_err("refused").to_string();
            assert!(
                err.contains("damaged") && err.contains("verify --repair"),
                "{err}"
            );
            let report = Lake::repair(&root).expect("repair");
            assert!(report.rebuilt && report.state_from_previous);
            assert_eq!(report.files, committed.files.len());
            assert_eq!(report.left_out.len(), 1, "{:?}", report.left_out);
            assert!(report.left_out[0].0.ends_with("part-stray.parquet"));
            assert!(stray.exists(), "nothing is deleted");
            std::fs::remove_file(&stray).expect("remove the stray");
            same_lake(&Lake::open(&root).expect("open after repair"));
            std::fs::write(&stray, b"not parquet").expect("stray again");
        }
        // A sound manifest is left as it is.
        std::fs::remove_file(&stray).expect("remove the stray");
        let before = std::fs::read(&pointer).expect("pointer");
        assert!(!Lake::repair(&root).expect("repair").rebuilt);
        assert_eq!(std::fs::read(&pointer).expect("pointer"), before);
    });
}

/// A lake at `root` holding the samples of `seed` (`rows` swaps and trades) and one sync state
/// committed after them.
fn lake_with_state(
    root: &Path,
    seed: u64,
    rows: usize,
    key: &str,
    value: serde_json::Value,
) -> Lake {
    let lake = Lake::open(root).expect("open");
    write_all(
        &lake,
        &Samples::generate(seed, rows).batches().expect("batches"),
    );
    let mut tx = lake.transaction().expect("transaction");
    tx.set_state(key, value);
    tx.commit().expect("state commit");
    lake
}

/// Replaces the lake's manifest by `m`, written as the single manifest document of a lake from
/// before the commit log (which readers still accept).
fn replace_manifest(root: &Path, m: &dexlake::lake::Manifest) {
    for dir in [support::LOG_DIR, support::CHECKPOINT_DIR] {
        std::fs::remove_dir_all(root.join(dir)).expect("remove the log");
    }
    std::fs::remove_file(root.join(support::LAST_CHECKPOINT_PATH)).expect("remove the pointer");
    std::fs::write(root.join(support::MANIFEST_PATH), m.to_bytes()).expect("write manifest");
}

/// Swaps `ids`, each at `day` plus `id` seconds, with `slot` as their block slot.
fn swaps_on(day: u32, ids: &[i64], slot: i64) -> Vec<Swap> {
    let base = Samples::generate(1, 1).swaps[0].clone();
    let t0 = Utc
        .with_ymd_and_hms(2024, 5, day, 12, 0, 0)
        .single()
        .expect("time");
    ids.iter()
        .map(|&id| Swap {
            id,
            block_slot: slot,
            block_time: t0 + ChronoDuration::seconds(id),
            ..base.clone()
        })
        .collect()
}

/// `(id, block_slot)` of every swap in every Parquet file under `swaps/` on disk, committed
/// or not: what a `read_parquet('<lake>/swaps/**/*.parquet')` glob reads.
fn swaps_on_disk(root: &Path) -> Vec<(i64, i64)> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut out = Vec::new();
    let mut stack = vec![root.join("swaps")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("list") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                let file = std::fs::File::open(&path).expect("open");
                let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                    .expect("parquet")
                    .build()
                    .expect("reader");
                for batch in reader {
                    let batch = batch.expect("batch");
                    let ids = batch.column_by_name("id").expect("id");
                    let slots = batch.column_by_name("block_slot").expect("block_slot");
                    let (ids, slots) = (
                        ids.as_primitive::<Int64Type>(),
                        slots.as_primitive::<Int64Type>(),
                    );
                    out.extend((0..batch.num_rows()).map(|i| (ids.value(i), slots.value(i))));
                }
            }
        }
    }
    out.sort_unstable();
    out
}

#[test]
fn an_id_moved_to_another_day_is_stored_once_with_the_newest_answer() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let write = |swaps: &[Swap]| {
            let mut tx = lake.transaction().expect("transaction");
            tx.write(
                Dataset::Swaps,
                convert::swaps_to_batch(swaps).expect("batch"),
            )
            .expect("write");
            tx.commit().expect("commit")
        };
        write(&swaps_on(1, &[1, 2, 3, 4, 5], 1));
        let entry = lake
            .manifest()
            .expect("manifest")
            .files
            .into_values()
            .next();
        assert_eq!(
            entry.map(|e| (e.min_id, e.max_id)),
            Some((Some(1), Some(5))),
            "the manifest keeps each file's id range"
        );

        // The service's newer answer puts id 3 on the next day: it replaces the committed one.
        let moved = write(&swaps_on(2, &[3], 2));
        assert_eq!(
            moved.rows_added.get(&Dataset::Swaps),
            None,
            "not a new swap"
        );
        // One write holding id 6 on two days keeps its last record.
        let mut twice = swaps_on(1, &[6], 1);
        twice.extend(swaps_on(2, &[6], 2));
        let s = write(&twice);
        assert_eq!(s.rows_added.get(&Dataset::Swaps), Some(&1));

        let want = vec![(1, 1), (2, 1), (3, 2), (4, 1), (5, 1), (6, 2)];
        // The rewritten files stay for the older versions until a vacuum; then a glob over
        // the folders reads the committed rows.
        assert!(swaps_on_disk(dir.path()).len() > want.len());
        vacuum_all(&lake);
        assert_eq!(swaps_on_disk(dir.path()), want, "a glob over the folders");
        assert_eq!(lake.row_count(Dataset::Swaps).expect("rows"), 6);
        let frame = scanned_frame(&lake, Dataset::Swaps);
        let column = |name: &str| -> Vec<i64> {
            let c = frame.column(name).expect("column");
            c.i64().expect("i64").into_no_null_iter().collect()
        };
        let scanned: Vec<(i64, i64)> = column("id").into_iter().zip(column("block_slot")).collect();
        assert_eq!(scanned, want, "Lake::scan");
        let report = lake.verify().expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);

        // Writing the same answers again changes nothing.
        let files = lake.manifest().expect("manifest").files;
        let again = write(&swaps_on(2, &[3, 6], 2));
        assert_eq!(again.files_added, 0);
        assert!(again.rows_added.is_empty());
        assert_eq!(lake.manifest().expect("manifest").files, files);
    });
}

#[test]
fn verify_reports_an_id_stored_in_two_partitions() {
    use dexlake::lake::FileEntry;
    use support::{NewFile, commit_files, data_file_name, encode_records};
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        write_all(
            &lake,
            &[(
                Dataset::Swaps,
                convert::swaps_to_batch(&swaps_on(1, &[1, 2, 3], 1)).expect("batch"),
            )],
        );
        assert!(lake.verify().expect("verify").is_ok());

        // A file written the way a per-partition de-duplication would have: ids 2 and 3 again,
        // a day later, committed beside the first.
        let moved = swaps_on(2, &[2, 3, 4], 2);
        let batch = convert::swaps_to_batch(&moved).expect("batch");
        let data = encode_records(Dataset::Swaps, &batch, 1024, 3).expect("encode");
        let manifest = lake.manifest().expect("manifest");
        let file = NewFile {
            path: format!(
                "swaps/chain=altchain/date=2024-05-02/{}",
                data_file_name(manifest.version + 1, 0)
            ),
            entry: FileEntry {
                dataset: Dataset::Swaps,
                rows: 3,
                bytes: data.len() as u64,
                min_time: moved[0].block_time,
                max_time: moved[2].block_time,
                schema_version: dexlake::lake::schema::SCHEMA_VERSION,
                min_id: None,
                max_id: None,
            },
            data: data.into(),
        };
        let commit = support::Commit {
            version: manifest.version + 1,
            ..Default::default()
        };
        commit_files(&lake, commit, vec![file], Vec::new()).expect("commit by hand");
        let unranged = |lake: &Lake| {
            lake.manifest()
                .expect("manifest")
                .files
                .values()
                .filter(|e| e.min_id.is_none())
                .count()
        };
        assert_eq!(unranged(&lake), 1);

        let report = lake.verify().expect("verify");
        assert_eq!(
            report.problems,
            vec![Problem::DuplicateIds {
                dataset: Dataset::Swaps,
                ids: 2,
                extra_rows: 2,
            }]
        );
        assert!(report.problems[0].to_string().contains("2 swaps ids"));

        // The next write of id 3 at its first-day time: the record committed at that time stays
        // (swaps never change), the copy at another time goes, and the file listed without an
        // id range gets one.
        write_all(
            &lake,
            &[(
                Dataset::Swaps,
                convert::swaps_to_batch(&swaps_on(1, &[3], 3)).expect("batch"),
            )],
        );
        assert_eq!(unranged(&lake), 0);
        vacuum_all(&lake);
        assert_eq!(
            swaps_on_disk(dir.path()),
            vec![(1, 1), (2, 1), (2, 2), (3, 1), (4, 2)]
        );
        let report = lake.verify().expect("verify");
        assert_eq!(
            report.problems,
            vec![Problem::DuplicateIds {
                dataset: Dataset::Swaps,
                ids: 1,
                extra_rows: 1,
            }]
        );
    });
}

#[test]
fn verify_runs_while_a_writer_holds_the_lake() {
    use support::Journal;
    bounded(60, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let writer = Lake::open(dir.path()).expect("open");
        let batches = Samples::generate(5, 50).batches().expect("batches");
        write_all(&writer, &batches);
        let quick = LakeOptions {
            lock_timeout: Duration::from_millis(200),
            ..LakeOptions::default()
        };
        let checker = Lake::open_with(dir.path(), quick).expect("open");

        // A writer holds the lake in the middle of a commit: its journal and a new file are
        // written, the manifest not yet.
        let tx = writer.transaction().expect("writer");
        let manifest = writer.manifest().expect("manifest");
        let (committed, _) = manifest.files.iter().next().expect("a committed file");
        let partition = committed.rsplit_once('/').expect("a folder").0;
        let adding = format!("{partition}/part-in-progress.parquet");
        let store = writer.store();
        Journal {
            version: manifest.version + 1,
            add: vec![adding.clone()],
            remove: Vec::new(),
            delete: Vec::new(),
        }
        .store(store)
        .expect("journal");
        store
            .put(&adding, &store.get(committed).expect("read"))
            .expect("put");

        let started = Instant::now();
        let report = checker
            .verify()
            .expect("verify does not wait for the writer");
        assert!(report.is_ok(), "{:?}", report.problems);
        assert!(report.recovery.is_empty(), "nothing cleaned under a writer");
        assert_eq!(report.version, manifest.version);
        assert!(started.elapsed() < Duration::from_secs(5));

        // Once the writer is gone, verify cleans up its interrupted commit. A child process
        // another test spawns holds a copy of the lock's descriptor between its fork and its
        // exec, and verify skips the cleanup while the lock is taken, so it may take a few.
        drop(tx);
        let mut report = checker.verify().expect("verify");
        for _ in 0..50 {
            if !report.recovery.rolled_back.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            report = checker.verify().expect("verify");
        }
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!(report.recovery.rolled_back, vec![adding]);
    });
}

#[test]
fn the_commit_log_checkpoints_cleans_up_and_every_handle_reads_the_same_lake() {
    bounded(180, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let writer = Lake::open(&root).expect("open");
        let reader = Lake::open(&root).expect("open a reader");
        write_all(
            &writer,
            &Samples::generate(31, 60).batches().expect("batches"),
        );
        assert!(reader.state("job/0").expect("state").is_none());
        let stale = Lake::open(&root).expect("a handle that reads once, then sleeps");
        let _ = stale.manifest().expect("manifest");
        // Past the first checkpoint's threshold, so entries and an old checkpoint are
        // cleaned up after the second one.
        let commits = 2 * support::MIN_TAIL_ENTRIES + 5;
        for i in 0..commits {
            let mut tx = writer.transaction().expect("transaction");
            tx.set_state(format!("job/{}", i % 7), serde_json::json!(i));
            tx.commit().expect("commit");
            if i % 50 == 0 {
                // A handle that follows the log entry by entry.
                assert_eq!(
                    reader.state(&format!("job/{}", i % 7)).expect("state"),
                    Some(serde_json::json!(i))
                );
            }
        }
        let last = support::last_checkpoint(writer.store())
            .expect("pointer")
            .expect("a checkpoint was written");
        assert!(last.version > support::MIN_TAIL_ENTRIES, "{last:?}");
        let oldest_entry = || {
            writer
                .store()
                .list(support::LOG_DIR)
                .expect("list")
                .iter()
                .filter_map(|p| support::version_of(p))
                .min()
                .expect("entries")
        };
        assert_eq!(oldest_entry(), 1, "a checkpoint deletes no entry");
        let oldest = vacuum_all(&writer).oldest_version;
        assert!(
            oldest_entry() > 1 && oldest_entry() <= oldest,
            "a vacuum deletes the entries before the checkpoint before the newest"
        );

        let expected = writer.manifest().expect("manifest");
        for (name, handle) in [
            ("follower", reader),
            ("stale", stale),
            ("fresh", Lake::open(&root).expect("open")),
        ] {
            assert_eq!(handle.manifest().expect("manifest"), expected, "{name}");
            for d in Dataset::ALL {
                assert!(
                    scanned_frame(&handle, d).equals_missing(&scanned_frame(&writer, d)),
                    "{name} {d}"
                );
            }
        }
        assert!(writer.verify().expect("verify").is_ok());
    });
}

#[test]
fn a_lake_with_the_single_manifest_of_earlier_versions_is_read_and_moved_to_the_log() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let lake = lake_with_state(&root, 41, 80, "sync/x", serde_json::json!({"cursor": "c"}));
        let before = lake.manifest().expect("manifest");
        let frames: Vec<DataFrame> = Dataset::ALL
            .iter()
            .map(|d| scanned_frame(&lake, *d))
            .collect();
        drop(lake);
        replace_manifest(&root, &before);

        let lake = Lake::open(&root).expect("an earlier lake opens");
        assert_eq!(lake.manifest().expect("manifest"), before);
        assert_eq!(
            lake.state("sync/x").expect("state"),
            Some(serde_json::json!({"cursor": "c"}))
        );
        // The first commit turns the single manifest into the log.
        write_all(
            &lake,
            &Samples::generate(42, 20).batches().expect("batches"),
        );
        assert!(
            !root.join(support::MANIFEST_PATH).exists(),
            "the old manifest is gone"
        );
        assert!(root.join(support::LAST_CHECKPOINT_PATH).exists());
        let after = Lake::open(&root)
            .expect("open")
            .manifest()
            .expect("manifest");
        assert_eq!(after.version, before.version + 1);
        assert_eq!(after.state, before.state);
        for d in Dataset::ALL {
            let rows =
                |m: &dexlake::lake::Manifest| -> u64 { m.files_of(d).map(|(_, e)| e.rows).sum() };
            assert!(rows(&after) >= rows(&before), "{d}");
        }
        let fresh = Lake::open(&root).expect("open");
        for (d, frame) in Dataset::ALL.iter().zip(&frames) {
            let now = scanned_frame(&fresh, *d);
            assert!(now.height() >= frame.height(), "{d}");
        }
        assert!(fresh.verify().expect("verify").is_ok());
    });
}

#[test]
fn compacting_more_files_than_the_merge_fan_in_keeps_every_row_in_sorted_bounded_files() {
    use dexlake::lake::MERGE_FAN_IN;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    bounded(300, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open_with(dir.path(), small_file_options()).expect("open");
        let commits = MERGE_FAN_IN as i64 + 8;
        let ids = commit_overlapping_small_files(&lake, commits, 150);
        let before = scanned_frame(&lake, Dataset::Swaps);
        let manifest = lake.manifest().expect("manifest");
        let days = 3;
        assert_eq!(manifest.files.len(), commits as usize * days);

        let report = lake.compact().expect("compact");
        assert_eq!(report.partitions, days);
        assert_eq!(report.files_removed, manifest.files.len());
        assert_eq!(report.rows[&Dataset::Swaps], ids.len() as u64);
        assert!(scanned_frame(&lake, Dataset::Swaps).equals_missing(&before));
        assert_eq!(committed_ids(&lake), ids);

        let manifest = lake.manifest().expect("manifest");
        let mut by_day: BTreeMap<String, Vec<&String>> = BTreeMap::new();
        for path in manifest.files.keys() {
            let (day, _) = path.rsplit_once('/').expect("folder");
            by_day.entry(day.to_owned()).or_default().push(path);
        }
        for (day, files) in by_day {
            // In name order, the files of a day hold its rows in (block_time, id) order.
            let mut last: Option<(i64, i64)> = None;
            for (i, path) in files.iter().enumerate() {
                let entry = &manifest.files[*path];
                let data = std::fs::read(dir.path().join(path)).expect("read");
                let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(data))
                    .expect("parquet");
                let groups: Vec<i64> = reader
                    .metadata()
                    .row_groups()
                    .iter()
                    .map(|g| g.num_rows())
                    .collect();
                let rows: i64 = groups.iter().sum();
                assert!(
                    groups[..groups.len() - 1].iter().all(|&g| g == 256),
                    "{path}"
                );
                assert_eq!(entry.rows, rows as u64, "{path}");
                assert!(rows <= 1_000, "{path}");
                if i + 1 < files.len() {
                    assert_eq!(rows, 1_000, "{day}: only the last file is short");
                }
                let batch = concat_batches(
                    &reader.schema().clone(),
                    &reader
                        .build()
                        .expect("reader")
                        .collect::<Result<Vec<_>, _>>()
                        .expect("batches"),
                )
                .expect("concat");
                let times = batch
                    .column_by_name("block_time")
                    .expect("time")
                    .as_any()
                    .downcast_ref::<arrow_array::TimestampMicrosecondArray>()
                    .expect("micros");
                let file_ids = batch
                    .column_by_name("id")
                    .expect("id")
                    .as_any()
                    .downcast_ref::<arrow_array::Int64Array>()
                    .expect("i64");
                for r in 0..batch.num_rows() {
                    let key = (times.value(r), file_ids.value(r));
                    assert!(last.is_none_or(|l| l < key), "{path} row {r} out of order");
                    last = Some(key);
                }
                let min = |a: &[i64]| a.iter().copied().min();
                let max = |a: &[i64]| a.iter().copied().max();
                assert_eq!(Some(entry.min_time.timestamp_micros()), min(times.values()));
                assert_eq!(Some(entry.max_time.timestamp_micros()), max(times.values()));
                assert_eq!(entry.min_id, min(file_ids.values()));
                assert_eq!(entry.max_id, max(file_ids.values()));
            }
        }
        // Nothing but the committed files on disk once a vacuum deleted the replaced ones; a
        // second compaction has nothing to do.
        assert!(
            !manifest.removed.is_empty(),
            "the replaced files are retained"
        );
        vacuum_all(&lake);
        let manifest = lake.manifest().expect("manifest");
        let on_disk = lake.store().list("swaps").expect("list");
        assert_eq!(on_disk, manifest.files.keys().cloned().collect::<Vec<_>>());
        let again = lake.compact().expect("compact again");
        assert_eq!(again, dexlake::lake::CompactReport::default());
        assert_eq!(lake.manifest().expect("manifest"), manifest);
        assert!(lake.verify().expect("verify").is_ok());
    });
}

const COMPACT_CRASH_ENV: &str = "DEXLAKE_COMPACT_CRASH_CHILD_LAKE";

/// The child of the compaction crash test: compacts the lake.
#[test]
#[ignore = "run only as the compaction crash test's child process"]
fn compact_crash_child() {
    let Ok(root) = std::env::var(COMPACT_CRASH_ENV) else {
        return;
    };
    let lake = Lake::open_with(&root, small_file_options()).expect("child opens the lake");
    lake.compact().expect("child compact");
}

#[test]
fn a_compaction_killed_part_way_leaves_the_same_rows_and_no_stray_file() {
    bounded(600, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        // A fresh lake of small files, and its manifest before any compaction.
        let fresh = || {
            if root.exists() {
                std::fs::remove_dir_all(&root).expect("remove the compacted lake");
            }
            let lake = Lake::open_with(&root, small_file_options()).expect("open");
            let ids = commit_overlapping_small_files(&lake, 40, 400);
            (ids, lake.manifest().expect("manifest"))
        };
        let (mut ids, mut manifest) = fresh();
        let exe = std::env::current_exe().expect("test binary");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut longest_ms = 1_500;
        let mut killed_inside = 0;
        for round in 0..16 {
            if killed_inside >= 3 {
                break;
            }
            let mut child = Command::new(&exe)
                .args([
                    "--exact",
                    "lake::compact_crash_child",
                    "--ignored",
                    "--nocapture",
                ])
                .env(COMPACT_CRASH_ENV, &root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn child");
            std::thread::sleep(Duration::from_millis(rng.random_range(20..longest_ms)));
            // `Child::kill` sends SIGKILL on Unix.
            child.kill().expect("kill child");
            child.wait().expect("reap child");
            let journal = root.join(support::JOURNAL_PATH).exists();

            let lake = Lake::open_with(&root, small_file_options()).expect("open after kill");
            let report = lake.verify().expect("verify");
            assert!(report.is_ok(), "round {round}: {:?}", report.problems);
            assert_eq!(committed_ids(&lake), ids, "round {round}");
            let now = lake.manifest().expect("manifest");
            let on_disk = lake.store().list("swaps").expect("list");
            let mut kept: Vec<String> = now
                .files
                .keys()
                .chain(now.removed.keys())
                .cloned()
                .collect();
            kept.sort();
            assert_eq!(
                on_disk, kept,
                "round {round}: files on disk are exactly the committed ones and those a \
                 landed compaction retained"
            );
            if now.version != manifest.version {
                // The compaction landed before the kill: start again on a fresh lake and
                // kill sooner.
                (ids, manifest) = fresh();
                longest_ms = (longest_ms / 2).max(40);
                continue;
            }
            assert_eq!(now, manifest, "round {round}");
            if journal {
                killed_inside += 1;
            }
        }
        assert!(killed_inside > 0, "no kill landed inside a compaction");
        let lake = Lake::open_with(&root, small_file_options()).expect("open");
        lake.compact().expect("compact");
        assert_eq!(committed_ids(&lake), ids);
        assert!(lake.verify().expect("verify").is_ok());
    });
}

#[test]
fn compact_partitions_merges_only_the_partitions_given() {
    use dexlake::lake::Partition;
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open_with(dir.path(), small_file_options()).expect("open");
        let ids = commit_overlapping_small_files(&lake, 4, 90);
        let before = lake.manifest().expect("manifest");
        let partitions: BTreeSet<Partition> = before
            .files
            .keys()
            .map(|p| Partition::from_file_path(p).expect("partition"))
            .collect();
        assert_eq!(partitions.len(), 3);
        let first: BTreeSet<Partition> = partitions.iter().take(1).cloned().collect();
        let dir_of = |p: &Partition| format!("{}/", p.dir());

        let report = lake.compact_partitions(&first).expect("compact one");
        assert_eq!((report.partitions, report.files_removed), (1, 4));
        let after = lake.manifest().expect("manifest");
        for p in &partitions {
            let files = |m: &dexlake::lake::Manifest| {
                m.files
                    .iter()
                    .filter(|(path, _)| path.starts_with(&dir_of(p)))
                    .map(|(path, e)| (path.clone(), e.clone()))
                    .collect::<Vec<_>>()
            };
            if first.contains(p) {
                assert_eq!(files(&after).len(), 1);
            } else {
                assert_eq!(files(&after), files(&before), "{} untouched", p.dir());
            }
        }
        assert_eq!(committed_ids(&lake), ids);
        let none = lake
            .compact_partitions(&BTreeSet::new())
            .expect("compact none");
        assert_eq!(none, dexlake::lake::CompactReport::default());
        assert!(lake.verify().expect("verify").is_ok());
    });
}

#[test]
fn tagged_writes_count_the_rows_each_tag_added() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let batch = |swaps: &[Swap]| convert::swaps_to_batch(swaps).expect("batch");
        let mut tx = lake.transaction().expect("transaction");
        tx.write_tagged(Dataset::Swaps, batch(&swaps_on(1, &[1, 2, 3], 1)), 7)
            .expect("write");
        // Overlapping writers: the last staged record of an id wins, so ids 2 and 3 count for
        // the second writer, with 4.
        tx.write_tagged(Dataset::Swaps, batch(&swaps_on(1, &[2, 3, 4], 1)), 9)
            .expect("write");
        tx.write(Dataset::Swaps, batch(&swaps_on(1, &[5], 1)))
            .expect("write");
        let first = tx.commit().expect("commit");
        assert_eq!(first.rows_added.get(&Dataset::Swaps), Some(&5));
        assert_eq!(
            first.rows_added_by_tag,
            BTreeMap::from([(7, 1), (9, 3)]),
            "untagged rows are counted only per dataset"
        );

        // Known ids add nothing; an id moved to another day is not new either.
        let mut tx = lake.transaction().expect("transaction");
        tx.write_tagged(Dataset::Swaps, batch(&swaps_on(1, &[1, 6], 1)), 7)
            .expect("write");
        tx.write_tagged(Dataset::Swaps, batch(&swaps_on(2, &[3], 2)), 9)
            .expect("write");
        let second = tx.commit().expect("commit");
        assert_eq!(second.rows_added.get(&Dataset::Swaps), Some(&1));
        assert_eq!(second.rows_added_by_tag, BTreeMap::from([(7, 1)]));

        // Datasets that replace on write: a revised candle is not new, a new one is.
        let samples = Samples::generate(3, 4);
        let candles = samples
            .batches()
            .expect("batches")
            .into_iter()
            .find(|(d, _)| *d == Dataset::Candles)
            .expect("candles")
            .1;
        let mut tx = lake.transaction().expect("transaction");
        tx.write_tagged(Dataset::Candles, candles.slice(0, 2), 1)
            .expect("write");
        tx.commit().expect("commit");
        let mut tx = lake.transaction().expect("transaction");
        tx.write_tagged(Dataset::Candles, candles.clone(), 2)
            .expect("write");
        let third = tx.commit().expect("commit");
        let n = candles.num_rows() as u64;
        assert_eq!(third.rows_added.get(&Dataset::Candles), Some(&(n - 2)));
        assert_eq!(third.rows_added_by_tag, BTreeMap::from([(2, n - 2)]));
    });
}

#[test]
fn a_commit_whose_version_another_writer_took_fails_cleanly_and_removes_its_files() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("lake");
        let lake = lake_with_state(&root, 51, 40, "sync/a", serde_json::json!(1));
        let before = lake.manifest().expect("manifest");
        let on_disk = swaps_on_disk(&root);
        let mut tx = lake.transaction().expect("transaction");
        tx.write(
            Dataset::Swaps,
            convert::swaps_to_batch(&swaps_on(9, &[900_001, 900_002], 9)).expect("batch"),
        )
        .expect("write");
        // Meanwhile a writer that ignores the lock commits the same version: state only.
        let rogue = support::Commit {
            version: before.version + 1,
            committed_at: Some(Utc::now()),
            state: BTreeMap::from([("sync/b".to_owned(), serde_json::json!(2))]),
            ..Default::default()
        };
        std::fs::write(
            root.join(support::entry_path(before.version + 1)),
            serde_json::to_vec(&rogue).expect("json"),
        )
        .expect("rogue entry");
        let err = tx.commit().expect_err("the version is taken");
        assert!(
            matches!(err, Error::CommitConflict { version, .. } if version == before.version + 1),
            "{err:?}"
        );
        assert!(err.to_string().contains("another writer"), "{err}");
        // The other writer's commit stands, none of this one is visible or left on disk.
        let after = Lake::open(&root).expect("open");
        let m = after.manifest().expect("manifest");
        assert_eq!(m.version, before.version + 1);
        assert_eq!(m.state.get("sync/b"), Some(&serde_json::json!(2)));
        assert_eq!(m.files, before.files);
        assert_eq!(swaps_on_disk(&root), on_disk);
        assert!(after.verify().expect("verify").is_ok());
        // Started again, the write lands on the new version.
        write_all(
            &after,
            &[(
                Dataset::Swaps,
                convert::swaps_to_batch(&swaps_on(9, &[900_001, 900_002], 9)).expect("batch"),
            )],
        );
        assert_eq!(
            after.manifest().expect("manifest").version,
            before.version + 2
        );
    });
}

#[test]
fn repeats_are_dropped_after_a_compaction_of_files_the_writer_added() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open(dir.path()).expect("open");
        let batch = |ids: &[i64]| convert::swaps_to_batch(&swaps_on(1, ids, 1)).expect("batch");
        write_all(&lake, &[(Dataset::Swaps, batch(&[1, 2, 3]))]);
        write_all(&lake, &[(Dataset::Swaps, batch(&[10, 11, 12]))]);
        let report = lake.compact().expect("compact");
        assert_eq!(report.files_removed, 2, "{report:?}");
        // The same handle writes the second batch again, then a mix of old and new ids.
        let again = write_all(&lake, &[(Dataset::Swaps, batch(&[10, 11, 12]))]);
        assert!(again.rows_added.is_empty(), "{again:?}");
        let mixed = write_all(&lake, &[(Dataset::Swaps, batch(&[3, 12, 20]))]);
        assert_eq!(mixed.rows_added.get(&Dataset::Swaps), Some(&1));
        assert_eq!(lake.row_count(Dataset::Swaps).expect("rows"), 7);
        assert!(lake.verify().expect("verify").is_ok());
    });
}

/// Vacuums `lake` keeping only its newest version: every replaced file and the old log go.
fn vacuum_all(lake: &Lake) -> dexlake::lake::VacuumReport {
    lake.vacuum(dexlake::lake::VacuumOptions {
        retain: Duration::ZERO,
        dry_run: false,
    })
    .expect("vacuum")
}
