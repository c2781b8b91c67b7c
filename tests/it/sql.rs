//! `dexlake sql` and `Query::sql`: every dataset a table of exactly its committed files (with
//! the hive columns, struct fields by path, an empty table for a dataset without files), the
//! numbers equal to the same numbers counted another way, the CLI equal to the query, and one
//! line refusing what is not one read of the lake.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use dexlake::lake::sample::Samples;
use dexlake::lake::{Dataset, Lake, scan_columns};
use dexlake::live::{FollowConfig, Follower};
use dexlake::query::LakeQuery as _;
use dexlake::sync::CancelToken;
use polars::prelude::*;

use crate::common::{self, sim_client, tiny_sim};

/// A lake of the sample records of every dataset but `bars`, written in two commits.
fn sample_lake() -> (tempfile::TempDir, Lake, Samples) {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("lake");
    let samples = Samples::generate(7, 300);
    let batches = samples.batches().expect("batches");
    let (first, second) = batches.split_at(batches.len() / 2);
    common::lake::write_all(&lake, first);
    common::lake::write_all(&lake, second);
    (dir, lake, samples)
}

/// `dexlake --lake LAKE sql QUERY args...`: (exit status, stdout, stderr).
fn sql_cli(lake: &Path, query: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(lake)
        .args(["sql", query])
        .args(args)
        .output()
        .expect("the dexlake binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The one value of a one-row, one-column answer, as an integer.
fn single(df: &DataFrame) -> i64 {
    assert_eq!(df.shape(), (1, 1), "{df}");
    df.columns()[0]
        .cast(&DataType::Int64)
        .unwrap()
        .i64()
        .unwrap()
        .get(0)
        .unwrap()
}

fn sql(lake: &Lake, query: &str) -> DataFrame {
    lake.query()
        .sql(query)
        .unwrap_or_else(|e| panic!("{query}: {e}"))
        .value
}

/// The refusal of `query`: a usage error of one line, from the query and from the CLI (exit
/// status 2, one `error:` line, no output).
fn refused(lake: &Lake, query: &str) -> String {
    let e = lake.query().sql(query).expect_err(query);
    assert_eq!(e.kind(), dexlake::ErrorKind::Usage, "{query}: {e}");
    let text = e.to_string();
    assert!(!text.contains('\n'), "{query}: {text}");
    let (status, out, err) = sql_cli(lake.root(), query, &[]);
    assert_eq!(status, 2, "{query}: {err}");
    assert!(out.is_empty(), "{query}: {out}");
    assert_eq!(err.lines().count(), 1, "{query}: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(&text),
        "{query}: {err}"
    );
    text
}

/// Every dataset is a table of its committed rows with the scan's columns (the hive columns
/// among them), an empty one when the dataset has no file; struct fields are read by path.
#[test]
fn every_dataset_is_a_table_of_its_committed_rows() {
    let (_dir, lake, samples) = sample_lake();
    let counts = samples.row_counts();
    for dataset in Dataset::ALL {
        let name = dataset.name();
        let n = single(&sql(&lake, &format!("select count(*) as n from {name}")));
        assert_eq!(
            n as u64,
            counts.get(&dataset).copied().unwrap_or(0),
            "{name}"
        );
        assert_eq!(n as u64, lake.row_count(dataset).unwrap(), "{name}");
        let all = sql(&lake, &format!("select * from {name} limit 1"));
        let columns: Vec<String> = all
            .get_column_names()
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(columns, scan_columns(dataset), "{name}");
    }
    // The follow's bars: no file here, an empty table with its columns and the interval.
    let bars = sql(&lake, "select * from bars");
    assert_eq!(bars.height(), 0);
    assert!(bars.column("interval").is_ok() && bars.column("date").is_ok());

    // The hive columns, from the paths: the dates of the swaps' partitions.
    let dates = sql(
        &lake,
        "select distinct chain, cast(date as varchar) as date from swaps order by date",
    );
    let mut from_records: Vec<String> = samples
        .swaps
        .iter()
        .map(|s| s.block_time.date_naive().to_string())
        .collect();
    from_records.sort();
    from_records.dedup();
    let dates_read: Vec<String> = dates
        .column("date")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|d| d.unwrap().to_owned())
        .collect();
    assert_eq!(dates_read, from_records);
    assert!(from_records.len() > 1, "{from_records:?}");

    // Struct fields by path, also a quoted one that is no identifier: the same values as
    // polars' own field access on the dataset's scan.
    let by_sql = sql(
        &lake,
        "select token_address, market.price as price, metrics.\"1d\".volume as volume \
         from token_profiles order by token_address, fetched_at",
    );
    let by_polars = lake
        .scan(Dataset::TokenProfiles)
        .unwrap()
        .sort(
            ["token_address", "fetched_at"],
            SortMultipleOptions::default(),
        )
        .select([
            col("token_address"),
            col("market")
                .struct_()
                .field_by_name("price")
                .alias("price"),
            col("metrics")
                .struct_()
                .field_by_name("1d")
                .struct_()
                .field_by_name("volume")
                .alias("volume"),
        ])
        .collect()
        .unwrap();
    assert!(by_sql.equals_missing(&by_polars), "{by_sql}\n{by_polars}");
    assert!(by_sql.column("price").unwrap().null_count() < by_sql.height());
    assert!(by_sql.column("volume").unwrap().null_count() < by_sql.height());
}

/// Refusals: one line, exit status 2, nothing read or written.
#[test]
fn what_is_not_one_read_of_the_lake_is_refused_in_one_line() {
    let (_dir, lake, _) = sample_lake();
    let files = |lake: &Lake| lake.snapshot().unwrap().files.len();
    let before = (lake.snapshot().unwrap().version, files(&lake));
    assert!(refused(&lake, "select count(* from swaps").contains("cannot parse"));
    assert!(refused(&lake, "select * from swapz").contains("no table swapz"));
    let unknown = refused(&lake, "select no_such_column from swaps");
    assert!(unknown.contains("no_such_column"), "{unknown}");
    let unknown = refused(&lake, "select market.no_such_field from token_profiles");
    assert!(unknown.contains("no_such_field"), "{unknown}");
    for write in [
        "create table t as select * from swaps",
        "drop table swaps",
        "insert into swaps select * from swaps",
        "delete from swaps",
    ] {
        assert!(refused(&lake, write).contains("is not a query"), "{write}");
    }
    assert!(refused(&lake, "select 1; drop table swaps").contains("2 statements"));
    let glob = format!(
        "select count(*) from read_parquet('{}/swaps/**/*.parquet')",
        lake.root().display()
    );
    assert!(refused(&lake, &glob).contains("table function"));
    // The query is the whole selection.
    let e = lake.query().token("T").sql("select 1").unwrap_err();
    assert!(e.to_string().contains("selects its rows itself"), "{e}");
    assert_eq!(
        (lake.snapshot().unwrap().version, files(&lake)),
        before,
        "a refused statement changed the lake"
    );
}

/// A Parquet file beside the committed ones that no commit holds (a crash's leftover) is not
/// read: the count is the committed one, where a glob of the folder counts the leftover too.
#[test]
fn a_leftover_file_no_commit_holds_is_not_read() {
    let (dir, lake, samples) = sample_lake();
    let manifest = lake.snapshot().unwrap();
    let (committed, _) = manifest
        .files_of(Dataset::Swaps)
        .next()
        .expect("a committed swaps file");
    let source = dir.path().join(committed);
    let leftover = source.with_file_name("part-leftover-uncommitted.parquet");
    std::fs::copy(&source, &leftover).unwrap();

    let query = "select count(*) as n from swaps";
    let n = single(&sql(&lake, query));
    assert_eq!(n as usize, samples.swaps.len());
    let (status, out, err) = sql_cli(dir.path(), query, &["--format", "csv"]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(out, format!("n\n{n}\n"));
    // The glob reads the leftover.
    let globbed = LazyFrame::scan_parquet(
        PlRefPath::try_from_pathbuf(dir.path().join("swaps/**/*.parquet")).unwrap(),
        ScanArgsParquet::default(),
    )
    .unwrap()
    .select([len()])
    .collect()
    .unwrap();
    assert!(single(&globbed) > n, "{globbed}");
}

fn since() -> DateTime<Utc> {
    "2025-05-25T00:00:00Z".parse().unwrap()
}

/// On a lake that `dexlake follow` keeps (the swaps of a token and their closed hourly bars):
/// a group-by equals the manifest's row counts per partition, the bars' swap counts equal the
/// swaps counted by SQL, and the CLI's output is the query's answer, which names the lake
/// version it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_on_a_followed_lake_agrees_with_the_manifest_the_bars_and_the_cli() {
    let sim = tiny_sim(7).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = FollowConfig {
        tokens: vec![token.clone()],
        interval_seconds: 3_600,
        since: Some(since()),
        ..FollowConfig::default()
    };
    let cancel = CancelToken::new();
    let mut follower = Follower::new(sim_client(&sim), Arc::clone(&lake), config).unwrap();
    let poll = follower.poll(&cancel).await.unwrap();
    let watermark = follower.watermark().unwrap();
    follower.commit(&poll.closed).unwrap();
    sim.shutdown().await;
    assert!(poll.closed.height() > 20, "{}", poll.closed);

    // A group-by over the hive column `date` equals the manifest's rows per date folder.
    let manifest = lake.snapshot().unwrap();
    let mut per_date: BTreeMap<String, i64> = BTreeMap::new();
    for (path, entry) in manifest.files_of(Dataset::Swaps) {
        let date = path
            .split('/')
            .find_map(|p| p.strip_prefix("date="))
            .expect("a date folder");
        *per_date.entry(date.to_owned()).or_default() += entry.rows as i64;
    }
    let grouped = sql(
        &lake,
        "select cast(date as varchar) as date, count(*) as n from swaps group by date order by date",
    );
    let by_sql: BTreeMap<String, i64> = grouped
        .column("date")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(Option::unwrap)
        .zip(
            grouped
                .column("n")
                .unwrap()
                .cast(&DataType::Int64)
                .unwrap()
                .i64()
                .unwrap()
                .into_no_null_iter(),
        )
        .map(|(d, n)| (d.to_owned(), n))
        .collect();
    assert_eq!(by_sql, per_date);
    assert!(!per_date.is_empty());

    // The follow's bars count the token's swaps from `since` up to the watermark.
    let from = since().timestamp_micros();
    let to = watermark.timestamp_micros();
    let swaps = single(&sql(
        &lake,
        &format!(
            "select count(*) from swaps where (token_address_in = '{token}' or token_address_out = '{token}') \
             and cast(block_time as bigint) >= {from} and cast(block_time as bigint) < {to}"
        ),
    ));
    let in_bars = single(&sql(
        &lake,
        &format!(
            "select sum(\"count\") from bars where token_address = '{token}' and \"interval\" = 3600"
        ),
    ));
    assert_eq!(in_bars, swaps);
    assert!(swaps > 0);

    // The CLI writes the query's answer, and the answer names the version it read.
    let query = format!(
        "select \"timestamp\", open, close, \"count\" from bars where token_address = '{token}' order by \"timestamp\""
    );
    let answer = lake.query().sql(&query).unwrap();
    assert_eq!(answer.version, manifest.version);
    assert!(answer.coverage.targets.is_empty() && answer.warnings.is_empty());
    assert_eq!(answer.value.height(), poll.closed.height());
    let out = dir.path().join("bars.parquet");
    let (status, _, err) = sql_cli(
        dir.path(),
        &query,
        &["--format", "parquet", "--out", out.to_str().unwrap()],
    );
    assert_eq!(status, 0, "{err}");
    let written = ParquetReader::new(std::fs::File::open(&out).unwrap())
        .finish()
        .unwrap();
    assert!(
        written.equals_missing(&answer.value),
        "{written}\n{}",
        answer.value
    );
}

/// A committed file whose bytes changed but not its size fails the read itself: the error
/// names the file, as every reader's does (exit status 5).
#[test]
fn a_damaged_committed_file_is_named() {
    let (dir, lake, _) = sample_lake();
    let manifest = lake.snapshot().unwrap();
    let (path, _) = manifest.files_of(Dataset::Swaps).next().unwrap();
    let file = dir.path().join(path);
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    for b in &mut bytes[n / 4..n / 2] {
        *b ^= 0x5a;
    }
    std::fs::write(&file, bytes).unwrap();
    let query = "select sum(usd_amount_in) as usd from swaps";
    let e = lake.query().sql(query).unwrap_err();
    assert_eq!(e.kind(), dexlake::ErrorKind::DamagedLake, "{e}");
    assert!(e.to_string().contains(path.as_str()), "{e}");
    let (status, _, err) = sql_cli(dir.path(), query, &[]);
    assert_eq!(status, 5, "{err}");
    assert!(err.contains(path.as_str()), "{err}");
}
