//! `dexlake bench-lake` (hidden): writes the simulator's altchain swaps (or their trades)
//! straight into a lake, for benchmarks that need millions of rows.
//!
//! The rows are the simulator's own wire swaps (`Chain::swap`, what get-swaps serves) or, with
//! `--dataset trades`, the same swaps from the wallet's side (`Chain::trade`), written
//! through the same conversion and the same transactional writer as `dexlake sync`, then
//! compacted, so the lake has the layout a sync followed by `dexlake compact` gives; it only
//! skips the HTTP round trips and JSON. Sync records its cursors in the manifest too; this
//! command records none, so a later sync of the same lake starts over.
//!
//! With `--small-files` the lake is left as many small syncs leave it, for benchmarks of
//! `dexlake compact`: the rows are dealt into chunks of about `--chunk` rows (chunk `c` of `k`
//! holds swaps `c`, `c + k`, `c + 2k`, …, so every chunk spans the whole period, as syncs of
//! many tokens do), each chunk becomes one file per day, its rows sorted as the writer sorts
//! them, and nothing is compacted. Those files are committed straight
//! through `commit_files`, skipping the writer's duplicate checks (the simulator's ids are
//! unique), which would otherwise read every earlier file of a day at each commit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, Utc};
use clap::Args;
use dexlake::lake::schema::SCHEMA_VERSION;
use dexlake::lake::test_support::{Commit, NewFile, commit_files, data_file_name, encode_records};
use dexlake::lake::{ChainFamily, Dataset, FileEntry, Lake, Partition, convert};
use dexlake::sim::{Scale, SyntheticMarket};

use crate::Global;

/// Arguments of `dexlake bench-lake`.
#[derive(Args, Debug)]
pub struct BenchLakeArgs {
    /// Folder of the lake to write (created if missing; must hold no rows of the dataset yet).
    pub dir: PathBuf,
    /// Dataset to write: `swaps` or `trades` (one trade per swap).
    #[arg(long, default_value = "swaps")]
    pub dataset: String,
    /// Seed of the synthetic market.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Size of the market.
    #[arg(long, default_value = "large")]
    pub scale: Scale,
    /// Rows per commit.
    #[arg(long, default_value_t = 1_000_000)]
    pub chunk: usize,
    /// Write only the first N swaps of the market.
    #[arg(long)]
    pub rows: Option<usize>,
    /// Leave the rows in small files (one per chunk and day) and do not compact.
    #[arg(long)]
    pub small_files: bool,
}

/// Chunks committed together in `--small-files` mode: fewer manifest rewrites.
const CHUNKS_PER_COMMIT: usize = 8;

/// Records of one chunk, as models, grouped by the UTC day of their `block_time`.
enum Chunk {
    Swaps(BTreeMap<NaiveDate, Vec<dexlake::api::models::Swap>>),
    Trades(BTreeMap<NaiveDate, Vec<dexlake::api::models::Trade>>),
}

/// One file per day of `records`: sorted and encoded as the writer does.
fn day_files<T>(
    lake: &Lake,
    dataset: Dataset,
    days: BTreeMap<NaiveDate, Vec<T>>,
    to_batch: impl Fn(&[T]) -> dexlake::Result<arrow::array::RecordBatch>,
    key: impl Fn(&T) -> (i64, DateTime<Utc>),
    version: u64,
    seq: &mut usize,
) -> anyhow::Result<Vec<NewFile>> {
    let opts = lake.options();
    let mut out = Vec::new();
    for (date, records) in days {
        let batch = to_batch(&records)?;
        let data = encode_records(dataset, &batch, opts.row_group_rows, opts.zstd_level)?;
        let ids = records.iter().map(|r| key(r).0);
        let times = records.iter().map(|r| key(r).1);
        let partition = Partition {
            dataset,
            chain: ChainFamily::Altchain,
            interval: None,
            date,
        };
        out.push(NewFile {
            path: format!("{}/{}", partition.dir(), data_file_name(version, *seq)),
            entry: FileEntry {
                dataset,
                rows: records.len() as u64,
                bytes: data.len() as u64,
                min_time: times.clone().min().context("a day has records")?,
                max_time: times.max().context("a day has records")?,
                schema_version: SCHEMA_VERSION,
                min_id: ids.clone().min(),
                max_id: ids.max(),
            },
            data: data.into(),
        });
        *seq += 1;
    }
    Ok(out)
}

pub fn run(_global: &Global, args: BenchLakeArgs) -> anyhow::Result<ExitCode> {
    let lake = Lake::open(&args.dir)
        .with_context(|| format!("opening the lake {}", args.dir.display()))?;
    let dataset = match args.dataset.as_str() {
        "swaps" => Dataset::Swaps,
        "trades" => Dataset::Trades,
        other => anyhow::bail!("bench-lake writes swaps or trades, not {other:?}"),
    };
    anyhow::ensure!(
        lake.row_count(dataset)? == 0,
        "the lake at {} already holds {}",
        args.dir.display(),
        args.dataset
    );
    let market = SyntheticMarket::generate(args.seed, args.scale);
    let chain = &market.alt;
    let n = args
        .rows
        .map_or(chain.swap_count(), |r| r.min(chain.swap_count()));
    let chunk = args.chunk.max(1);
    if args.small_files {
        let count = n.div_ceil(chunk);
        let mut pending = Vec::new();
        let mut files = 0;
        let mut rows = 0;
        for c in 0..count {
            let range = (c..n).step_by(count).map(|i| i as u32);
            let parts = match dataset {
                Dataset::Trades => Chunk::Trades(range.map(|i| chain.trade(i)).fold(
                    BTreeMap::new(),
                    |mut days: BTreeMap<NaiveDate, Vec<_>>, t| {
                        days.entry(t.block_time.date_naive()).or_default().push(t);
                        days
                    },
                )),
                _ => Chunk::Swaps(range.map(|i| chain.swap(i)).fold(
                    BTreeMap::new(),
                    |mut days: BTreeMap<NaiveDate, Vec<_>>, s| {
                        days.entry(s.block_time.date_naive()).or_default().push(s);
                        days
                    },
                )),
            };
            rows += match &parts {
                Chunk::Swaps(days) => days.values().map(Vec::len).sum::<usize>(),
                Chunk::Trades(days) => days.values().map(Vec::len).sum(),
            };
            pending.push(parts);
            if pending.len() == CHUNKS_PER_COMMIT || c + 1 == count {
                let version = lake.snapshot()?.version + 1;
                let mut seq = 0;
                let mut new = Vec::new();
                for parts in pending.drain(..) {
                    new.extend(match parts {
                        Chunk::Swaps(days) => day_files(
                            &lake,
                            dataset,
                            days,
                            convert::swaps_to_batch,
                            |s| (s.id, s.block_time),
                            version,
                            &mut seq,
                        )?,
                        Chunk::Trades(days) => day_files(
                            &lake,
                            dataset,
                            days,
                            convert::trades_to_batch,
                            |t| (t.id, t.block_time),
                            version,
                            &mut seq,
                        )?,
                    });
                }
                files += new.len();
                let commit = Commit {
                    version,
                    ..Default::default()
                };
                commit_files(&lake, commit, new, Vec::new())?;
                eprintln!(
                    "wrote {rows} of {n} {}: {} of {count} chunks, {files} files",
                    args.dataset,
                    c + 1
                );
            }
        }
        println!("{n}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut start = 0usize;
    while start < n {
        let end = (start + chunk).min(n);
        let range = start as u32..end as u32;
        let batch = match dataset {
            Dataset::Trades => {
                convert::trades_to_batch(&range.map(|i| chain.trade(i)).collect::<Vec<_>>())?
            }
            _ => convert::swaps_to_batch(&range.map(|i| chain.swap(i)).collect::<Vec<_>>())?,
        };
        let mut tx = lake.transaction()?;
        tx.write(dataset, batch)?;
        tx.commit()?;
        eprintln!("wrote {} {start}..{end} of {n}", args.dataset);
        start = end;
    }
    let report = lake.compact()?;
    eprintln!(
        "compacted {} partitions: {} files into {}",
        report.partitions, report.files_removed, report.files_added
    );
    println!("{n}");
    Ok(ExitCode::SUCCESS)
}
