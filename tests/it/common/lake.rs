//! Lake helpers shared by the lake tests on a folder (`lake.rs`) and on an object store
//! (`s3.rs`).

use std::io::Cursor;
use std::sync::mpsc;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use chrono::{Duration as ChronoDuration, TimeZone, Utc};
use dexlake::api::models::{Swap, SwapType};
use dexlake::lake::sample::Samples;
use dexlake::lake::schema::record_schema;
use dexlake::lake::test_support::encode_parquet;
use dexlake::lake::{Dataset, Lake, LakeOptions, convert};
use polars::prelude::*;

/// Runs `f` on its own thread and fails the test if it takes longer than `secs`.
pub fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => handle.join().expect("the bounded test body panicked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked before reporting; surface its panic.
            match handle.join() {
                Ok(v) => v,
                Err(e) => std::panic::resume_unwind(e),
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test took longer than {secs} s"),
    }
}

pub fn write_all(lake: &Lake, batches: &[(Dataset, RecordBatch)]) -> dexlake::lake::CommitSummary {
    let mut tx = lake.transaction().expect("transaction");
    for (d, b) in batches {
        tx.write(*d, b.clone()).expect("write");
    }
    tx.commit().expect("commit")
}

/// Sort columns that make rows of a dataset unique.
pub fn order_by(dataset: Dataset) -> Vec<&'static str> {
    let mut by = Vec::new();
    if dataset.has_chain_id() {
        by.push("chain_id");
    }
    by.extend(dataset.path_columns());
    by.extend(dataset.key_columns());
    by
}

/// The input batches of one dataset as polars reads them from a plain Parquet file: the
/// reference a lake scan must equal.
pub fn expected_frame(dataset: Dataset, batches: &[&RecordBatch]) -> DataFrame {
    let all = concat_batches(&record_schema(dataset), batches.iter().copied()).expect("concat");
    let bytes = encode_parquet(dataset, &all, 1 << 20, 1).expect("encode");
    let df = ParquetReader::new(Cursor::new(bytes))
        .finish()
        .expect("polars reads the reference file");
    df.sort(order_by(dataset), SortMultipleOptions::default())
        .expect("sort")
}

/// The committed rows of a dataset, record columns only, in key order.
pub fn scanned_frame(lake: &Lake, dataset: Dataset) -> DataFrame {
    let cols: Vec<String> = record_schema(dataset)
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    lake.scan(dataset)
        .expect("scan")
        .collect()
        .expect("collect")
        .select(cols)
        .expect("record columns")
        .sort(order_by(dataset), SortMultipleOptions::default())
        .expect("sort")
}

pub fn batches_of(all: &[(Dataset, RecordBatch)], dataset: Dataset) -> Vec<&RecordBatch> {
    all.iter()
        .filter(|(d, _)| *d == dataset)
        .map(|(_, b)| b)
        .collect()
}

/// Options of the compaction tests: small output files, and every file of the small-file lakes
/// below them counted as small.
pub fn small_file_options() -> LakeOptions {
    LakeOptions {
        max_rows_per_file: 1_000,
        compact_below_rows: 1_000,
        row_group_rows: 256,
        ..LakeOptions::default()
    }
}

/// Commits `commits` transactions of `rows` swaps each over three days, commit `k` holding ids
/// `k`, `k + commits`, `k + 2·commits`, …: every commit leaves one small file per day, and the
/// files of a day overlap in time and id. Returns every id written.
pub fn commit_overlapping_small_files(lake: &Lake, commits: i64, rows: i64) -> Vec<i64> {
    let base = Samples::generate(1, 1).swaps[0].clone();
    let t0 = Utc
        .with_ymd_and_hms(2024, 5, 1, 0, 0, 0)
        .single()
        .expect("time");
    for k in 0..commits {
        let swaps: Vec<Swap> = (0..rows)
            .map(|i| {
                let id = k + i * commits;
                Swap {
                    id,
                    block_slot: id,
                    block_time: t0 + ChronoDuration::seconds((id * 7_919) % (3 * 86_400)),
                    ..base.clone()
                }
            })
            .collect();
        write_all(
            lake,
            &[(
                Dataset::Swaps,
                convert::swaps_to_batch(&swaps).expect("batch"),
            )],
        );
    }
    (0..commits * rows).collect()
}

/// The committed swap ids, sorted.
pub fn committed_ids(lake: &Lake) -> Vec<i64> {
    lake.scan(Dataset::Swaps)
        .expect("scan")
        .select([col("id")])
        .sort(["id"], SortMultipleOptions::default())
        .collect()
        .expect("collect")
        .column("id")
        .expect("id")
        .i64()
        .expect("i64")
        .into_no_null_iter()
        .collect()
}

/// The swaps block `i` of a crash test writes: ids `[i·rows, (i+1)·rows)` over three days.
pub fn block_swaps(i: i64, rows: i64) -> Vec<Swap> {
    let base = Samples::generate(1, 1).swaps[0].clone();
    let t0 = Utc
        .with_ymd_and_hms(2024, 5, 1, 0, 0, 0)
        .single()
        .expect("time");
    (i * rows..(i + 1) * rows)
        .map(|id| Swap {
            id,
            swap_type: SwapType::QuoteToken,
            block_slot: id,
            block_time: t0 + ChronoDuration::seconds((id * 7_919) % (3 * 86_400)),
            ..base.clone()
        })
        .collect()
}

/// The writer a crash test kills: commits forever, each commit adding the next block of
/// `rows` ids, re-writing the previous one (which must change nothing) and recording the
/// number of commits as the state `crash/commits`; compacts after every fourth commit. With
/// `merge`, files of fewer than `rows` rows are small and the commits merge them
/// (`Transaction::merge_small_files`), so kills land in merging commits too.
pub fn crash_writer_loop(root: &str, rows: i64, merge: bool) -> ! {
    let opts = LakeOptions {
        compact_below_rows: if merge { rows as usize } else { 100_000 },
        ..LakeOptions::default()
    };
    let lake = Lake::open_with(root, opts).expect("child opens the lake");
    loop {
        let done = lake
            .state("crash/commits")
            .expect("state")
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        let mut swaps = block_swaps(done, rows);
        if done > 0 {
            swaps.extend(block_swaps(done - 1, rows));
        }
        let mut tx = lake.transaction().expect("child tx");
        if merge {
            tx.merge_small_files();
        }
        tx.write(
            Dataset::Swaps,
            convert::swaps_to_batch(&swaps).expect("batch"),
        )
        .expect("write");
        tx.set_state("crash/commits", serde_json::json!(done + 1));
        tx.commit().expect("child commit");
        if done % 4 == 3 {
            lake.compact().expect("child compact");
        }
    }
}

/// After the crash writer of [`crash_writer_loop`] was killed: opens the lake at `root` and
/// checks that `verify` finds it sound, that its committed commit count did not go back from
/// `last_commits`, and that it holds exactly the ids of its commits. Returns the lake and the
/// commit count.
pub fn check_after_kill(root: &str, round: usize, last_commits: i64, rows: i64) -> (Lake, i64) {
    let lake = Lake::open(root).expect("open after the kill");
    let report = lake.verify().expect("verify");
    assert!(report.is_ok(), "round {round}: {:?}", report.problems);
    let commits = lake
        .state("crash/commits")
        .expect("state")
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    assert!(commits >= last_commits, "committed state went back");
    let want: Vec<i64> = (0..commits * rows).collect();
    assert!(
        committed_ids(&lake) == want,
        "round {round}: the lake does not hold exactly {commits} commits"
    );
    (lake, commits)
}
