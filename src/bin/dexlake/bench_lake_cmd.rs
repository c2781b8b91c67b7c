//! `dexlake bench-lake` (hidden): writes the simulator's altchain swaps (or their trades), or a
//! dense EVM price history, straight into a lake, for benchmarks that need millions of rows.
//!
//! The rows are the simulator's own wire swaps (`Chain::swap`, what get-swaps serves) or, with
//! `--dataset trades`, the same swaps from the wallet's side (`Chain::trade`), written
//! through the same conversion and the same transactional writer as `dexlake sync`, then
//! compacted and vacuumed, so the lake has the layout a sync followed by `dexlake compact` and
//! `dexlake vacuum --retain 0s` gives (a glob of its folders reads what it commits); it only
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
//!
//! With `--dataset price-history` it writes the `price_history` of `--tokens` EVM tokens of
//! chain `--chain-id`, one point every `--series-interval` seconds for `--days` whole UTC days
//! ending at the simulator's present (2025-06-01T00:00:00Z): 43.2 million points at the
//! defaults (1,000 tokens, 30 days, 60 s). The simulator's EVM chains have a few hundred
//! tokens at most, so the values are not the simulator's but a random walk seeded by
//! `--seed` (token `k`'s walk does not depend on `--tokens`): each token (and its one pool) gets a random
//! address, a starting price between 10⁻⁶ and 10³ USD, a volatility and an activity rate;
//! each interval has trades with that rate, and then its price moves by a log-normal step
//! and its USD volume is log-normal, else its volume is 0 and its price the previous one (a
//! point holds the last price up to the end of its interval and the volume within it, as the
//! service's points do; see `docs/series.md`). Every token has a point in every interval,
//! as a complete sync of tokens trading throughout gives. The points go through the same
//! conversion and writer as `dexlake sync price-history` (partitions
//! `chain=evm-<id>/interval=<s>/date=<day>`), one commit per day (memory holds one day of
//! points), then the lake is compacted and vacuumed.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, Utc};
use clap::Args;
use dexlake::api::models::{PriceHistorySeries, PricePoint};
use dexlake::lake::convert::{HistorySeries, ToBatch};
use dexlake::lake::schema::SCHEMA_VERSION;
use dexlake::lake::test_support::{Commit, NewFile, commit_files, data_file_name, encode_records};
use dexlake::lake::{ChainFamily, Dataset, FileEntry, Lake, Partition, convert};
use dexlake::sim::{Scale, SyntheticMarket};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::Global;

/// Arguments of `dexlake bench-lake`.
#[derive(Args, Debug)]
pub struct BenchLakeArgs {
    /// Folder of the lake to write (created if missing; must hold no rows of the dataset yet).
    pub dir: PathBuf,
    /// Dataset to write: `swaps`, `trades` (one trade per swap) or `price-history`.
    #[arg(long, default_value = "swaps")]
    pub dataset: String,
    /// Seed of the synthetic market (of the random walks, with `--dataset price-history`).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// `--dataset price-history`: the EVM chain id of the series [default: 1].
    #[arg(long)]
    pub chain_id: Option<i64>,
    /// `--dataset price-history`: number of tokens [default: 1000].
    #[arg(long)]
    pub tokens: Option<usize>,
    /// `--dataset price-history`: number of whole UTC days, ending at 2025-06-01 [default: 30].
    #[arg(long)]
    pub days: Option<i64>,
    /// `--dataset price-history`: seconds between points, a divisor of a day [default: 60].
    #[arg(long)]
    pub series_interval: Option<i64>,
    /// Size of the market (swaps and trades).
    #[arg(long, default_value = "large")]
    pub scale: Scale,
    /// Rows per commit (swaps and trades).
    #[arg(long, default_value_t = 1_000_000)]
    pub chunk: usize,
    /// Write only the first N swaps of the market.
    #[arg(long)]
    pub rows: Option<usize>,
    /// Leave the rows in small files (one per chunk and day) and do not compact (swaps and
    /// trades).
    #[arg(long)]
    pub small_files: bool,
}

/// Chunks committed together in `--small-files` mode: fewer manifest rewrites.
const CHUNKS_PER_COMMIT: usize = 8;

/// Records of one chunk, as models that borrow the market's names, grouped by the UTC day of
/// their `block_time`.
enum Chunk<'a> {
    Swaps(BTreeMap<NaiveDate, Vec<dexlake::api::models::Swap<Cow<'a, str>>>>),
    Trades(BTreeMap<NaiveDate, Vec<dexlake::api::models::Trade<Cow<'a, str>>>>),
}

/// One file per day of `records`: sorted and encoded as the writer does.
fn day_files<T>(
    lake: &Lake,
    dataset: Dataset,
    days: BTreeMap<NaiveDate, Vec<T>>,
    to_batch: impl Fn(&[T]) -> dexlake::Result<arrow_array::RecordBatch>,
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
        "price-history" => return price_history(&lake, &args),
        other => anyhow::bail!("bench-lake writes swaps, trades or price-history, not {other:?}"),
    };
    anyhow::ensure!(
        args.chain_id.is_none()
            && args.tokens.is_none()
            && args.days.is_none()
            && args.series_interval.is_none(),
        "--chain-id, --tokens, --days and --series-interval are for --dataset price-history"
    );
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
                Dataset::Trades => Chunk::Trades(range.map(|i| chain.trade_view(i)).fold(
                    BTreeMap::new(),
                    |mut days: BTreeMap<NaiveDate, Vec<_>>, t| {
                        days.entry(t.block_time.date_naive()).or_default().push(t);
                        days
                    },
                )),
                _ => Chunk::Swaps(range.map(|i| chain.swap_view(i)).fold(
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
                convert::trades_to_batch(&range.map(|i| chain.trade_view(i)).collect::<Vec<_>>())?
            }
            _ => convert::swaps_to_batch(&range.map(|i| chain.swap_view(i)).collect::<Vec<_>>())?,
        };
        let mut tx = lake.transaction()?;
        tx.write(dataset, batch)?;
        tx.commit()?;
        eprintln!("wrote {} {start}..{end} of {n}", args.dataset);
        start = end;
    }
    compact_and_vacuum(&lake)?;
    println!("{n}");
    Ok(ExitCode::SUCCESS)
}

/// The simulator's present, 2025-06-01T00:00:00Z: the end of the price history.
const HISTORY_END: i64 = 1_748_736_000;

const DAY: i64 = 86_400;

/// One token's random walk (see the module documentation).
struct Walk {
    token: String,
    pool: String,
    rng: ChaCha8Rng,
    /// The last price, USD.
    price: f64,
    /// Standard deviation of a step of the log price.
    sigma: f64,
    /// Probability that an interval has trades.
    active: f64,
    /// Median USD volume of an interval with trades.
    volume: f64,
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A random EVM address: `0x` and 40 lowercase hex digits.
fn address(rng: &mut ChaCha8Rng) -> String {
    format!(
        "0x{:016x}{:016x}{:08x}",
        rng.random::<u64>(),
        rng.random::<u64>(),
        rng.random::<u32>()
    )
}

impl Walk {
    /// Token `k`'s walk: its own stream of the seed's generator.
    fn new(seed: u64, k: u64) -> Walk {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(k);
        Walk {
            token: address(&mut rng),
            pool: address(&mut rng),
            price: 10f64.powf(rng.random_range(-6.0..3.0)),
            sigma: rng.random_range(0.001..0.01),
            active: rng.random_range(0.1..0.95),
            volume: 10f64.powf(rng.random_range(1.0..5.0)),
            rng,
        }
    }

    /// The next point's price and volume.
    fn step(&mut self) -> (f64, f64) {
        if self.rng.random::<f64>() >= self.active {
            return (self.price, 0.0);
        }
        self.price *= (self.sigma * normal(&mut self.rng)).exp();
        let volume = self.volume * normal(&mut self.rng).exp();
        (self.price, volume)
    }
}

/// `--dataset price-history`: the random walks of the module documentation, a commit per day,
/// then compaction. Prints the number of points.
fn price_history(lake: &Lake, args: &BenchLakeArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        !args.small_files && args.rows.is_none(),
        "--small-files and --rows are for swaps and trades"
    );
    let chain_id = args.chain_id.unwrap_or(1);
    let tokens = args.tokens.unwrap_or(1_000);
    let days = args.days.unwrap_or(30);
    let interval = args.series_interval.unwrap_or(60);
    anyhow::ensure!(chain_id > 0, "--chain-id must be positive, not {chain_id}");
    anyhow::ensure!(tokens > 0, "--tokens must be positive");
    anyhow::ensure!(
        (1..=36_500).contains(&days),
        "--days must lie in 1..=36500, not {days}"
    );
    anyhow::ensure!(
        interval > 0 && DAY % interval == 0,
        "--series-interval must divide a day ({DAY} s), not {interval}"
    );
    anyhow::ensure!(
        lake.row_count(Dataset::PriceHistory)? == 0,
        "the lake at {} already holds price_history",
        lake.root().display()
    );
    let context = HistorySeries { chain_id, interval };
    let mut walks: Vec<Walk> = (0..tokens as u64)
        .map(|k| Walk::new(args.seed, k))
        .collect();
    let per_day = DAY / interval;
    let start = HISTORY_END - days * DAY;
    let mut points = 0u64;
    for d in 0..days {
        let day = start + d * DAY;
        let series: Vec<PriceHistorySeries> = walks
            .iter_mut()
            .map(|w| {
                let prices = (0..per_day)
                    .map(|j| {
                        let (usd_price, usd_volume) = w.step();
                        let t = day + j * interval;
                        Ok(PricePoint {
                            timestamp: DateTime::from_timestamp(t, 0)
                                .with_context(|| format!("{t} s is out of range"))?,
                            usd_price,
                            usd_volume,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok(PriceHistorySeries {
                    token_address: w.token.clone(),
                    pool_address: w.pool.clone(),
                    prices,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let batch = PriceHistorySeries::to_batch(&series, &context)?;
        drop(series);
        points += batch.num_rows() as u64;
        let mut tx = lake.transaction()?;
        tx.write(Dataset::PriceHistory, batch)?;
        tx.commit()?;
        eprintln!(
            "wrote price_history day {} of {days}: {points} points",
            d + 1
        );
    }
    compact_and_vacuum(lake)?;
    println!("{points}");
    Ok(ExitCode::SUCCESS)
}

/// Compacts the lake just written and deletes the files it replaced (a bench lake has no
/// older version to keep), so that a glob of its folders reads what it commits, as the peers of
/// `benches/compare/` do. One partition at a time, each vacuumed before the next: the disk
/// holds the lake and one partition's rewrite, not the lake twice (a 100M-swap lake is about
/// 18 GB).
fn compact_and_vacuum(lake: &Lake) -> anyhow::Result<()> {
    let partitions: std::collections::BTreeSet<Partition> = lake
        .manifest()?
        .files
        .keys()
        .map(|path| Partition::from_file_path(path))
        .collect::<dexlake::Result<_>>()?;
    let (mut removed, mut added) = (0, 0);
    for (k, partition) in partitions.iter().enumerate() {
        let report = lake.compact_partitions(&std::iter::once(partition.clone()).collect())?;
        lake.vacuum(dexlake::lake::VacuumOptions {
            retain: std::time::Duration::ZERO,
            dry_run: false,
        })?;
        removed += report.files_removed;
        added += report.files_added;
        eprintln!(
            "compacted {} of {} partitions: {removed} files into {added}",
            k + 1,
            partitions.len()
        );
    }
    Ok(())
}
