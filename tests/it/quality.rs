//! `dexlake check` on lakes synced from the `tiny` simulator: a clean lake has no finding (and
//! its candles equal the bars of its swaps), and each fault planted by a hand-made commit is
//! found, and only it (besides the buckets of the candles it changes).

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, BooleanArray, Float64Array, Int64Array, TimestampMicrosecondArray};
use chrono::{DateTime, Duration};
use dexlake::analytics::quality::{CheckOptions, CheckReport, check};
use dexlake::analytics::{EventSource, Selection, TimeRange, load_events};
use dexlake::lake::test_support::{
    self as support, NewFile, commit_files, data_file_name, encode_records,
};
use dexlake::lake::{Dataset, FileEntry, Lake};
use dexlake::sync::{Job, SyncConfig, Syncer};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

use crate::common::{self, sim_client, tiny_sim};

/// Width of the token candles synced, seconds.
const HOUR: i64 = 3600;
/// Width of the pool candles synced, seconds.
const QUARTER: i64 = 900;

/// The clean lake every test copies: the swaps and trades of every altchain token of the tiny
/// market (seed 5), the hourly candles of every token and the 15-minute candles of the most
/// active token's first pool, over the whole history. Also the most active token.
fn clean_lake() -> &'static (tempfile::TempDir, String) {
    static LAKE: OnceLock<(tempfile::TempDir, String)> = OnceLock::new();
    LAKE.get_or_init(|| {
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async {
                let sim = tiny_sim(5).await;
                let dir = tempfile::tempdir().expect("temp dir");
                let lake = Arc::new(Lake::open(dir.path()).expect("lake"));
                let catalog = &sim.market().catalog().altchain;
                let from = sim.market().now() - Duration::days(63);
                let mut jobs = Vec::new();
                for t in &catalog.tokens {
                    jobs.push(Job::Swaps {
                        token: Some(t.address.clone()),
                        wallet: None,
                        pool: None,
                    });
                    jobs.push(Job::Trades {
                        token: Some(t.address.clone()),
                        wallet: None,
                    });
                    jobs.push(Job::Candles {
                        token: Some(t.address.clone()),
                        pool: None,
                        interval: HOUR,
                        from,
                        to: None,
                    });
                }
                let top = catalog.tokens[0].clone();
                jobs.push(Job::Candles {
                    token: None,
                    pool: Some(top.pools[0].clone()),
                    interval: QUARTER,
                    from,
                    to: None,
                });
                let syncer =
                    Syncer::new(sim_client(&sim), Arc::clone(&lake), SyncConfig::default());
                let report = syncer.run(&jobs).await;
                assert!(!report.any_failed(), "sync failed: {report:?}");
                sim.shutdown().await;
                (dir, top.address)
            })
        })
        .join()
        .expect("the clean lake is synced")
    })
}

/// A copy of the clean lake in a folder of its own, and the most active token.
fn lake_copy() -> (tempfile::TempDir, Lake, String) {
    let (clean, token) = clean_lake();
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(clean.path(), dir.path());
    let lake = Lake::open(dir.path()).expect("the copy opens");
    (dir, lake, token.clone())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// One committed swaps file, read whole.
struct SwapFile {
    path: String,
    batch: RecordBatch,
}

fn swap_files(lake: &Lake) -> Vec<SwapFile> {
    let manifest = lake.manifest().expect("manifest");
    manifest
        .files_of(Dataset::Swaps)
        .map(|(path, _)| {
            let file = File::open(lake.root().join(path)).expect("open");
            let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                .expect("parquet")
                .build()
                .expect("reader");
            let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
            let batch = arrow_select::concat::concat_batches(&batches[0].schema(), &batches)
                .expect("concat");
            SwapFile {
                path: path.clone(),
                batch,
            }
        })
        .collect()
}

/// The file and row holding swap `id`.
fn find_swap(files: &[SwapFile], id: i64) -> (&SwapFile, usize) {
    files
        .iter()
        .find_map(|f| {
            let ids = f
                .batch
                .column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>();
            (0..ids.len()).find(|&i| ids.value(i) == id).map(|i| (f, i))
        })
        .expect("the swap is in the lake")
}

fn i64_at(batch: &RecordBatch, name: &str, row: usize) -> i64 {
    let c = batch.column_by_name(name).unwrap();
    match c.data_type() {
        arrow_schema::DataType::Timestamp(..) => {
            c.as_primitive::<TimestampMicrosecondType>().value(row)
        }
        _ => c.as_primitive::<Int64Type>().value(row),
    }
}

fn str_at(batch: &RecordBatch, name: &str, row: usize) -> String {
    batch
        .column_by_name(name)
        .unwrap()
        .as_string::<i32>()
        .value(row)
        .to_owned()
}

/// `batch` with column `name` replaced.
fn with_column(batch: &RecordBatch, name: &str, column: Arc<dyn Array>) -> RecordBatch {
    let schema = batch.schema();
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| {
            if f.name() == name {
                column.clone()
            } else {
                c.clone()
            }
        })
        .collect();
    RecordBatch::try_new(schema, columns).expect("batch")
}

/// `batch` with row `row` of column `name` (floats, integers or times) set to `value`.
fn set(batch: &RecordBatch, name: &str, row: usize, value: f64) -> RecordBatch {
    let c = batch.column_by_name(name).unwrap();
    let column: Arc<dyn Array> = match c.data_type() {
        arrow_schema::DataType::Float64 => {
            let mut v: Vec<f64> = c.as_primitive::<Float64Type>().values().to_vec();
            v[row] = value;
            Arc::new(Float64Array::from(v))
        }
        arrow_schema::DataType::Int64 => {
            let mut v: Vec<i64> = c.as_primitive::<Int64Type>().values().to_vec();
            v[row] = value as i64;
            Arc::new(Int64Array::from(v))
        }
        _ => {
            let mut v: Vec<i64> = c
                .as_primitive::<TimestampMicrosecondType>()
                .values()
                .to_vec();
            v[row] = value as i64;
            Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
        }
    };
    with_column(batch, name, column)
}

/// Commits `batch` as a new swaps file in the folder of `date` (`YYYY-MM-DD`), removing the
/// file `replaces` in the same commit: a hand-made commit, past the writer's checks.
fn commit_swaps(lake: &Lake, date: &str, batch: &RecordBatch, replaces: Option<&str>) {
    let manifest = lake.manifest().expect("manifest");
    let version = manifest.version + 1;
    let remove: Vec<String> = replaces.map(str::to_owned).into_iter().collect();
    let mut files = Vec::new();
    if batch.num_rows() > 0 {
        let data = encode_records(Dataset::Swaps, batch, 1024, 3).expect("encode");
        let times = batch
            .column_by_name("block_time")
            .unwrap()
            .as_primitive::<TimestampMicrosecondType>();
        let utc = |m: i64| DateTime::from_timestamp_micros(m).unwrap();
        let micros = || times.values().iter().copied();
        files.push(NewFile {
            path: format!(
                "swaps/chain=altchain/date={date}/{}",
                data_file_name(version, 0)
            ),
            entry: FileEntry {
                dataset: Dataset::Swaps,
                rows: batch.num_rows() as u64,
                bytes: data.len() as u64,
                min_time: utc(micros().min().unwrap()),
                max_time: utc(micros().max().unwrap()),
                schema_version: dexlake::lake::schema::SCHEMA_VERSION,
                min_id: None,
                max_id: None,
            },
            data: data.into(),
        });
    }
    let commit = support::Commit {
        version,
        ..Default::default()
    };
    commit_files(lake, commit, files, remove).expect("a hand-made commit");
}

/// The date folder of a file's path.
fn date_of(path: &str) -> String {
    path.split('/')
        .find_map(|p| p.strip_prefix("date="))
        .expect("a date folder")
        .to_owned()
}

/// Rewrites the file holding swap `id` with `edit` applied to its batch and row.
fn edit_swap(lake: &Lake, id: i64, edit: impl FnOnce(&RecordBatch, usize) -> RecordBatch) {
    let files = swap_files(lake);
    let (file, row) = find_swap(&files, id);
    let batch = edit(&file.batch, row);
    commit_swaps(lake, &date_of(&file.path), &batch, Some(&file.path));
}

/// `batch` without the rows `drop` picks.
fn without(batch: &RecordBatch, drop: impl Fn(usize) -> bool) -> RecordBatch {
    let keep: BooleanArray = (0..batch.num_rows()).map(|i| Some(!drop(i))).collect();
    arrow_select::filter::filter_record_batch(batch, &keep).expect("filter")
}

/// The token's swaps (token sides) in event order.
fn token_events(lake: &Lake, token: &str) -> dexlake::analytics::Events {
    let mut t = load_events(
        lake,
        EventSource::Swaps,
        &Selection::Token(token.to_owned()),
        TimeRange::default(),
    )
    .expect("events");
    t.pop().expect("the token has swaps").events
}

/// The check with every example kept; read in parts of about a fifth of the swaps (and the
/// ids and slots grouped in passes) it finds the same.
fn checked(lake: &Lake) -> CheckReport {
    let options = CheckOptions {
        examples: 10_000,
        ..CheckOptions::default()
    };
    let report = check(lake, &options).expect("check");
    let parts = CheckOptions {
        events_at_once: (report.swaps as usize / 5).max(1),
        ..options
    };
    assert_eq!(check(lake, &parts).expect("check in parts"), report);
    report
}

/// Every kind but `kinds` has no finding, and the candle mismatches (any) lie in the
/// buckets of the instants `touched` (microseconds).
fn only(report: &CheckReport, kinds: &[&str], touched: &[i64]) {
    for (kind, n) in report.findings.counts() {
        if kind != "candle_mismatches" && !kinds.contains(&kind) {
            assert_eq!(n, 0, "{kind}: {:#?}", report.findings);
        }
    }
    let c = &report.findings.candle_mismatches;
    assert!(c.count <= c.examples.len() as u64, "{c:#?}");
    for m in &c.examples {
        let start = m.timestamp.timestamp_micros();
        let width = m.interval * 1_000_000;
        assert!(
            touched.iter().any(|&t| (start..start + width).contains(&t)),
            "a mismatch away from the fault: {m:?}"
        );
    }
}

fn check_cli(lake: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["check", "--lake", lake.to_str().unwrap()])
        .args(extra)
        .output()
        .expect("the dexlake binary runs");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_lake_synced_from_the_simulator_is_clean_and_its_candles_equal_its_bars() {
    let (dir, lake, _) = lake_copy();
    let report = checked(&lake);
    assert!(report.is_clean(), "{:#?}", report.findings);
    assert_eq!(report.tokens, 10);
    assert_eq!(report.swaps, lake.row_count(Dataset::Swaps).unwrap());
    // Every series was compared (10 tokens and one pool), over every bucket holding a swap.
    let r = report.reconciled;
    assert_eq!((r.series, r.series_compared), (11, 11), "{r:?}");
    assert!(r.buckets_compared > 500, "{r:?}");

    let (code, out, err) = check_cli(dir.path(), &["--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let json: Value = serde_json::from_str(&out).expect("one JSON document");
    for (kind, n) in report.findings.counts() {
        assert_eq!(json["findings"][kind]["count"], 0, "{kind}");
        assert_eq!(n, 0);
    }
    assert_eq!(json["reconciled"]["buckets_compared"], r.buckets_compared);
    let (code, out, _) = check_cli(dir.path(), &[]);
    assert_eq!(code, 0);
    assert!(out.contains("clean: no finding"), "{out}");
}

#[test]
fn a_doctored_price_is_a_price_jump() {
    let (dir, lake, token) = lake_copy();
    let events = token_events(&lake, &token);
    let i = events.len() / 2;
    let (id, time) = (events.id[i], events.time[i]);
    edit_swap(&lake, id, |batch, row| {
        // The token's side of the swap: bought (`out`) or sold (`in`).
        let side = if str_at(batch, "token_address_out", row) == token {
            "out"
        } else {
            "in"
        };
        let column = format!("token_price_{side}");
        let price = batch
            .column_by_name(&column)
            .unwrap()
            .as_primitive::<Float64Type>()
            .value(row);
        set(batch, &column, row, price * 10.0)
    });
    let report = checked(&lake);
    only(&report, &["price_jumps"], &[time]);
    let jumps = &report.findings.price_jumps;
    assert_eq!(jumps.count, 1, "{jumps:#?}");
    assert_eq!(
        (jumps.examples[0].id, jumps.examples[0].token.as_str()),
        (id, token.as_str())
    );
    // The hourly candle holding it no longer matches the bars: the high (at least) differs.
    let m = &report.findings.candle_mismatches;
    assert!(
        m.examples.iter().any(|m| m.interval == HOUR
            && m.token.as_deref() == Some(&token)
            && m.fields.iter().any(|f| f.field == "high")),
        "{m:#?}"
    );

    // The CLI says so with status 1, in JSON and in a table.
    let (code, out, err) = check_cli(dir.path(), &["--format", "json"]);
    assert_eq!(code, 1, "{out}{err}");
    let json: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(json["findings"]["price_jumps"]["examples"][0]["id"], id);
    let (code, out, _) = check_cli(dir.path(), &["--token", &token]);
    assert_eq!(code, 1);
    assert!(out.contains(&format!("id {id}")), "{out}");

    // The daily report's "Data" section names it.
    #[cfg(feature = "report")]
    {
        let r = dexlake::report::build(&lake, &dexlake::report::ReportConfig::default())
            .expect("report");
        assert_eq!(r.quality.findings.price_jumps.count, 1);
        assert!(r.summary().contains("1 price_jumps"), "{}", r.summary());
        let out = tempfile::tempdir().unwrap();
        let html = std::fs::read_to_string(r.write(out.path()).expect("written")).unwrap();
        assert!(html.contains("<h2>Data</h2>"));
        assert!(
            html.contains(&format!("id {id}")),
            "the example on the page"
        );
    }
}

#[test]
fn a_removed_swap_is_found_by_the_reconciliation() {
    let (_dir, lake, token) = lake_copy();
    let events = token_events(&lake, &token);
    let i = events.len() / 3;
    let (id, time) = (events.id[i], events.time[i]);
    edit_swap(&lake, id, |batch, row| without(batch, |r| r == row));
    let report = checked(&lake);
    only(&report, &[], &[time]);
    let m = &report.findings.candle_mismatches;
    let hour = m
        .examples
        .iter()
        .find(|m| m.interval == HOUR && m.token.as_deref() == Some(&token))
        .unwrap_or_else(|| panic!("the hour of the removed swap: {m:#?}"));
    let count = hour
        .fields
        .iter()
        .find(|f| f.field == "count")
        .expect("count differs");
    assert_eq!(count.candle.unwrap() - count.bars.unwrap(), 1.0, "{hour:?}");
}

#[test]
fn a_duplicated_id_is_found() {
    let (_dir, lake, token) = lake_copy();
    let events = token_events(&lake, &token);
    let i = events.len() / 4;
    let (id, time) = (events.id[i], events.time[i]);
    let files = swap_files(&lake);
    let (file, row) = find_swap(&files, id);
    // A second file in the same folder holding the same row.
    commit_swaps(&lake, &date_of(&file.path), &file.batch.slice(row, 1), None);
    let report = checked(&lake);
    only(&report, &["duplicate_ids"], &[time]);
    let d = &report.findings.duplicate_ids;
    assert_eq!(d.count, 1, "{d:#?}");
    assert_eq!((d.examples[0].id, d.examples[0].copies), (id, 2));
    assert!(d.examples[0].differing.is_empty(), "{d:?}");

    // Checking the token alone finds it too, in one pass and in passes, over the swaps that
    // involve the token.
    let involving: u64 = swap_files(&lake)
        .iter()
        .map(|f| {
            (0..f.batch.num_rows())
                .filter(|&r| {
                    str_at(&f.batch, "token_address_in", r) == token
                        || str_at(&f.batch, "token_address_out", r) == token
                })
                .count() as u64
        })
        .sum();
    for events_at_once in [usize::MAX, (involving as usize / 3).max(1)] {
        let options = CheckOptions {
            tokens: Some(vec![token.clone()]),
            events_at_once,
            ..CheckOptions::default()
        };
        let of_token = check(&lake, &options).expect("check of the token");
        assert_eq!(of_token.rows["swaps"], involving, "{events_at_once}");
        let d = &of_token.findings.duplicate_ids;
        assert_eq!((d.count, d.examples[0].id), (1, id), "{events_at_once}");
    }
}

#[test]
fn the_examples_of_repeated_ids_are_the_smallest_ids_whatever_the_passes() {
    let (_dir, lake, _) = lake_copy();
    let files = swap_files(&lake);
    let file = &files[0];
    // Eight rows stored twice: eight duplicated ids, spread over the passes' residues.
    commit_swaps(&lake, &date_of(&file.path), &file.batch.slice(0, 8), None);
    let mut ids: Vec<i64> = (0..8).map(|r| i64_at(&file.batch, "id", r)).collect();
    ids.sort_unstable();
    let options = CheckOptions {
        examples: 3,
        ..CheckOptions::default()
    };
    let whole = check(&lake, &options).expect("check");
    let d = &whole.findings.duplicate_ids;
    assert_eq!(d.count, 8, "{d:#?}");
    let examples: Vec<i64> = d.examples.iter().map(|e| e.id).collect();
    assert_eq!(examples, ids[..3], "{d:#?}");
    let rows = whole.rows["swaps"] as usize;
    for passes in [3, 7] {
        let parts = CheckOptions {
            events_at_once: rows / passes,
            ..options.clone()
        };
        assert_eq!(
            check(&lake, &parts).expect("check in passes"),
            whole,
            "{passes}"
        );
    }
}

#[test]
fn a_moved_id_is_found() {
    let (_dir, lake, token) = lake_copy();
    let events = token_events(&lake, &token);
    // Two consecutive swaps of the token on either side of a midnight: a copy of the first
    // is put at the second's time and slot, in the next day's folder.
    let day = |t: i64| t.div_euclid(86_400_000_000);
    let i = (0..events.len() - 1)
        .find(|&i| day(events.time[i]) != day(events.time[i + 1]))
        .expect("swaps on two days");
    let (id, next) = (events.id[i], events.id[i + 1]);
    let files = swap_files(&lake);
    let (file, row) = find_swap(&files, id);
    let (next_file, next_row) = find_swap(&files, next);
    let next_time = i64_at(&next_file.batch, "block_time", next_row);
    let copy = file.batch.slice(row, 1);
    let copy = set(&copy, "block_time", 0, next_time as f64);
    let copy = set(
        &copy,
        "block_slot",
        0,
        i64_at(&next_file.batch, "block_slot", next_row) as f64,
    );
    commit_swaps(&lake, &date_of(&next_file.path), &copy, None);
    let report = checked(&lake);
    only(&report, &["moved_ids"], &[next_time]);
    let m = &report.findings.moved_ids;
    assert_eq!(m.count, 1, "{m:#?}");
    let e = &m.examples[0];
    assert_eq!((e.id, e.copies), (id, 2));
    let dates: BTreeSet<&String> = e.dates.iter().collect();
    assert_eq!(dates.len(), 2, "{e:?}");
    assert!(e.differing.contains(&"block_time".to_owned()), "{e:?}");
}

#[test]
fn a_time_going_backwards_is_found() {
    let (_dir, lake, token) = lake_copy();
    let files = swap_files(&lake);
    // Every swap's (slot, time), to find the slot before the chosen one.
    let mut all: Vec<(i64, i64)> = files
        .iter()
        .flat_map(|f| {
            (0..f.batch.num_rows()).map(|r| {
                (
                    i64_at(&f.batch, "block_slot", r),
                    i64_at(&f.batch, "block_time", r),
                )
            })
        })
        .collect();
    all.sort();
    let events = token_events(&lake, &token);
    let day = |t: i64| t.div_euclid(86_400_000_000);
    // A swap of the token alone in its slot whose previous slot is on the same day: it is
    // put a minute before that slot's time.
    let (id, new_time, old_time) = (events.len() / 2..events.len())
        .find_map(|i| {
            let p = all.partition_point(|&(s, _)| s < events.slot[i]);
            let alone = all.get(p + 1).is_none_or(|&(s, _)| s != events.slot[i]);
            let (_, before) = *all.get(p.checked_sub(1)?)?;
            let new = before - 60_000_000;
            (alone && day(new) == day(events.time[i])).then_some((
                events.id[i],
                new,
                events.time[i],
            ))
        })
        .expect("a swap to move back");
    edit_swap(&lake, id, |batch, row| {
        set(batch, "block_time", row, new_time as f64)
    });
    let report = checked(&lake);
    only(&report, &["time_backwards"], &[new_time, old_time]);
    let b = &report.findings.time_backwards;
    assert_eq!(b.count, 1, "{b:#?}");
    assert_eq!(b.examples[0].block_time.timestamp_micros(), new_time);
    assert_eq!(b.examples[0].dataset, "swaps");
}

#[test]
fn a_busy_hour_whose_swaps_are_removed_is_a_gap() {
    let (_dir, lake, token) = lake_copy();
    let events = token_events(&lake, &token);
    let t = &events.time;
    // A busy stretch: from just after a swap, an hour (or, if the tiny market has no such
    // hour, half an hour) whose neighbouring periods as long hold at least 35 swaps each.
    let count =
        |from: i64, to: i64| t.partition_point(|&x| x < to) - t.partition_point(|&x| x < from);
    let (start, hour) = [3_600_000_000i64, 1_800_000_000]
        .into_iter()
        .find_map(|len| {
            t.iter()
                .map(|&x| x + 1)
                .find(|&s| count(s - len, s) >= 35 && count(s + len, s + 2 * len) >= 35)
                .map(|s| (s, len))
        })
        .expect("a busy stretch in the tiny market");
    eprintln!("removing {} s of swaps", hour / 1_000_000);
    let gone: Vec<i64> = (0..t.len())
        .filter(|&i| (start..start + hour).contains(&t[i]))
        .map(|i| events.id[i])
        .collect();
    assert!(!gone.is_empty());
    let gone_set: BTreeSet<i64> = gone.iter().copied().collect();
    // Remove them from every file that holds one.
    for f in swap_files(&lake) {
        let ids = f
            .batch
            .column_by_name("id")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        if (0..ids.len()).any(|r| gone_set.contains(&ids.value(r))) {
            let rest = without(&f.batch, |r| gone_set.contains(&ids.value(r)));
            commit_swaps(&lake, &date_of(&f.path), &rest, Some(&f.path));
        }
    }
    let touched: Vec<i64> = (0..t.len())
        .filter(|&i| gone_set.contains(&events.id[i]))
        .map(|i| t[i])
        .collect();
    let report = checked(&lake);
    only(&report, &["gaps"], &touched);
    let g = &report.findings.gaps;
    assert_eq!(g.count, 1, "{g:#?}");
    let g = &g.examples[0];
    assert_eq!(g.token, token);
    assert!(
        g.from.timestamp_micros() < start && g.to.timestamp_micros() >= start + hour,
        "{g:?}"
    );
}

#[test]
fn a_check_that_cannot_run_exits_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = check_cli(dir.path(), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a dexlake lake"), "{err}");
    // A usage error is status 2 too (clap's).
    common::dexlake_cli_refused(&["check", "--token", ""], "--token");
}

#[test]
fn a_token_whose_swaps_have_no_price_is_all_jumps_and_the_check_runs() {
    // Every swap of the token priced 0 or negative on its side: each swap judged (8 on each
    // side) is a jump with no median, in the library, the JSON and the table.
    let (dir, lake, token) = lake_copy();
    let n = token_events(&lake, &token).len();
    assert!(n >= 17, "{n} swaps");
    for f in swap_files(&lake) {
        let mut batch = f.batch.clone();
        let mut touched = false;
        for side in ["in", "out"] {
            let column = format!("token_price_{side}");
            let mut prices: Vec<f64> = batch
                .column_by_name(&column)
                .unwrap()
                .as_primitive::<Float64Type>()
                .values()
                .to_vec();
            for (row, price) in prices.iter_mut().enumerate() {
                if str_at(&batch, &format!("token_address_{side}"), row) == token {
                    *price = if row % 2 == 0 { 0.0 } else { -1.0 };
                    touched = true;
                }
            }
            batch = with_column(&batch, &column, Arc::new(Float64Array::from(prices)));
        }
        if touched {
            commit_swaps(&lake, &date_of(&f.path), &batch, Some(&f.path));
        }
    }
    let report = checked(&lake);
    let jumps = &report.findings.price_jumps;
    assert_eq!(jumps.count, n as u64 - 16, "{jumps:#?}");
    assert!(
        jumps
            .examples
            .iter()
            .all(|j| j.token == token && j.median_price.is_none() && j.price <= 0.0),
        "{jumps:#?}"
    );

    let (code, out, err) = check_cli(dir.path(), &["--format", "json", "--token", &token]);
    assert_eq!(code, 1, "{out}{err}");
    let json: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(json["findings"]["price_jumps"]["count"], n as u64 - 16);
    assert_eq!(
        json["findings"]["price_jumps"]["examples"][0]["median_price"],
        Value::Null
    );
    let (code, out, err) = check_cli(dir.path(), &["--token", &token]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("rolling median none"), "{out}");
}

/// 2026-01-01T00:00:00Z, Unix seconds.
const START: i64 = 1_767_225_600;

/// A point price that moves slowly: about 1 % over an hour, never a jump.
fn smooth(m: i64) -> f64 {
    100.0 * (1.0 + 0.01 * (m as f64 / 60.0).sin())
}

/// Points of `token` every minute from `START` for `minutes` but `skip`, priced `price(m)`.
fn history(
    token: &str,
    minutes: i64,
    skip: impl Fn(i64) -> bool,
    price: impl Fn(i64) -> f64,
) -> dexlake::api::models::PriceHistorySeries {
    dexlake::api::models::PriceHistorySeries {
        token_address: token.into(),
        pool_address: format!("pool-{token}"),
        prices: (0..minutes)
            .filter(|m| !skip(*m))
            .map(|m| dexlake::api::models::PricePoint {
                timestamp: DateTime::from_timestamp(START + 60 * m, 0).unwrap(),
                usd_price: price(m),
                usd_volume: 10.0,
            })
            .collect(),
    }
}

/// A new lake holding the 60 s price history of chain 1 of `series`, written in the test.
fn history_lake(series: &[dexlake::api::models::PriceHistorySeries]) -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("lake");
    let batch = dexlake::lake::convert::price_history_to_batch(1, 60, series).expect("a batch");
    common::lake::write_all(&lake, &[(Dataset::PriceHistory, batch)]);
    (dir, lake)
}

#[test]
fn a_point_removed_from_a_price_history_is_a_series_gap() {
    // Minutes 60 to 62 of one series are missing; the other series is whole.
    let (dir, lake) = history_lake(&[
        history("0xaaa", 180, |m| (60..63).contains(&m), smooth),
        history("0xbbb", 180, |_| false, smooth),
    ]);
    let report = checked(&lake);
    assert_eq!(report.series.price_histories, 2, "{:?}", report.series);
    assert_eq!(report.series.records, 177 + 180);
    only(&report, &["series_gaps"], &[]);
    let g = &report.findings.series_gaps;
    assert_eq!(g.count, 1, "{g:#?}");
    let g = &g.examples[0];
    assert_eq!(
        (g.token.as_str(), g.chain_id, g.interval, g.missing_points),
        ("0xaaa", 1, 60, 3)
    );
    assert_eq!(
        (g.from.timestamp(), g.to.timestamp()),
        (START + 3600, START + 3600 + 180)
    );

    // Inside the fetched ranges only: a sync that fetched the first half hour of the token
    // did not fetch the missing minutes.
    let at = |s: i64| DateTime::from_timestamp(s, 0);
    let mut options = CheckOptions {
        examples: 10,
        ..CheckOptions::default()
    };
    let target =
        |token: Option<&str>, pool: Option<&str>| dexlake::analytics::quality::HistoryTarget {
            chain_id: 1,
            token: token.map(str::to_owned),
            pool: pool.map(str::to_owned),
            interval: 60,
        };
    options.history_fetched.insert(
        target(Some("0xaaa"), None),
        vec![TimeRange {
            from: at(START),
            to: at(START + 1800),
        }],
    );
    assert_eq!(
        check(&lake, &options).unwrap().findings.series_gaps.count,
        0
    );
    // A pool's sync that fetched the minutes: half of them found missing from its range.
    options.history_fetched.insert(
        target(None, Some("pool-0xaaa")),
        vec![TimeRange {
            from: at(START + 3600 + 60),
            to: at(START + 7200),
        }],
    );
    let g = check(&lake, &options).unwrap().findings.series_gaps;
    assert_eq!(g.count, 1, "{g:#?}");
    assert_eq!(g.examples[0].missing_points, 2);
    assert_eq!(g.examples[0].from.timestamp(), START + 3660);

    // The CLI: status 1, the kind in the table with its example, and in JSON.
    let (code, out, err) = check_cli(dir.path(), &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("series: 2 price histories and 0 candle series, 357 records"),
        "{out}"
    );
    assert!(out.contains("series_gaps (1 of 1):"), "{out}");
    assert!(
        out.contains("price_history chain 1 token 0xaaa pool pool-0xaaa 60 s: no point from"),
        "{out}"
    );
    let (code, out, _) = check_cli(dir.path(), &["--format", "json"]);
    assert_eq!(code, 1);
    let json: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(json["findings"]["series_gaps"]["count"], 1);
    assert_eq!(
        json["findings"]["series_gaps"]["examples"][0]["missing_points"],
        3
    );
    assert_eq!(json["series"]["price_histories"], 2);
    // Checking the other token only, nothing is found.
    let (code, out, _) = check_cli(dir.path(), &["--token", "0xbbb"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("clean: no finding"), "{out}");

    // The whole series is clean.
    let (_whole_dir, whole) = history_lake(&[history("0xaaa", 180, |_| false, smooth)]);
    assert!(checked(&whole).is_clean());
}

#[test]
fn a_price_jump_planted_in_a_series_is_found_by_the_swaps_rule() {
    // One point priced ten times its neighbours.
    let (_dir, lake) = history_lake(&[history(
        "0xaaa",
        180,
        |_| false,
        |m| smooth(m) * if m == 90 { 10.0 } else { 1.0 },
    )]);
    let report = checked(&lake);
    only(&report, &["series_jumps"], &[]);
    let j = &report.findings.series_jumps;
    assert_eq!(j.count, 1, "{j:#?}");
    let j = &j.examples[0];
    assert_eq!(
        (j.dataset, j.token.as_deref(), j.chain_id),
        ("price_history", Some("0xaaa"), Some(1))
    );
    assert_eq!(j.timestamp.timestamp(), START + 90 * 60);
    assert!(
        (j.log_deviation.unwrap() - 10f64.ln()).abs() < 0.05,
        "{j:?}"
    );
    // The swaps' rule and thresholds: with a floor above the jump, it is none.
    let lenient = CheckOptions {
        jumps: dexlake::analytics::quality::JumpRule {
            floor: 3.0,
            ..Default::default()
        },
        ..CheckOptions::default()
    };
    assert_eq!(
        check(&lake, &lenient).unwrap().findings.series_jumps.count,
        0
    );

    // A candle whose close is doctored in a lake's candles: a jump of the candles.
    let candles: Vec<dexlake::api::models::Candle> = (0..100)
        .map(|h| {
            let p = smooth(h) * if h == 50 { 0.1 } else { 1.0 };
            dexlake::api::models::Candle {
                timestamp: DateTime::from_timestamp(START + 3600 * h, 0).unwrap(),
                open: smooth(h),
                high: smooth(h).max(p),
                low: smooth(h).min(p),
                close: p,
                volume: 100.0,
                count: 3,
            }
        })
        .collect();
    let batch = dexlake::lake::convert::candles_to_batch(Some("T1"), None, 3600, &candles)
        .expect("a batch");
    common::lake::write_all(&lake, &[(Dataset::Candles, batch)]);
    let report = checked(&lake);
    assert_eq!(report.series.candle_series, 1);
    let j = &report.findings.series_jumps;
    assert_eq!(j.count, 2, "{j:#?}");
    let candle = j
        .examples
        .iter()
        .find(|j| j.dataset == "candles")
        .expect("the candle's jump");
    assert_eq!(
        (candle.token.as_deref(), candle.interval, candle.price),
        (Some("T1"), 3600, smooth(50) * 0.1)
    );
    assert_eq!(candle.timestamp.timestamp(), START + 50 * 3600);
}
