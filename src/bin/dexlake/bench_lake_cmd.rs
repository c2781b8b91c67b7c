//! `dexlake bench-lake` (hidden): writes the simulator's altchain swaps (or their trades)
//! straight into a lake, for benchmarks that need millions of rows.
//!
//! The rows are the simulator's own wire swaps (`Chain::swap`, what get-swaps serves) or, with
//! `--dataset trades`, the same swaps from the wallet's side (`Chain::trade`), written
//! through the same conversion and the same transactional writer as `dexlake sync`, then
//! compacted, so the lake has the layout a sync followed by `dexlake compact` gives; it only
//! skips the HTTP round trips and JSON. Sync records its cursors in the manifest too; this
//! command records none, so a later sync of the same lake starts over.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use dexlake::lake::{Dataset, Lake, convert};
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
    let n = chain.swap_count();
    let chunk = args.chunk.max(1);
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
