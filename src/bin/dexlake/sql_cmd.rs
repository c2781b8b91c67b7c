//! `dexlake sql`: a SQL query over the lake's datasets, each a table of its committed files
//! ([`dexlake::query::Query::sql`]).

use std::process::ExitCode;

use clap::Args;
use dexlake::query::LakeQuery as _;

use crate::Global;
use crate::open_lake::{AsOfArg, reading_lake};
use crate::output::Output;

/// Arguments of `dexlake sql`.
#[derive(Args, Debug)]
pub struct SqlArgs {
    /// One query (polars' SQL: SELECT, WITH, VALUES, UNION ...) over the tables swaps, trades,
    /// candles, price_history, prices, price_stats, token_profiles, portfolios and bars, with
    /// their hive columns (chain, interval, date); struct fields by path
    /// (`market.price`, `metrics."1d".volume`). Statements that write are refused.
    pub query: String,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

pub fn run(global: &Global, args: SqlArgs) -> anyhow::Result<ExitCode> {
    let lake = reading_lake(global, &args.as_of)?;
    let answer = lake.query().sql(&args.query)?;
    args.output.emit(answer)
}
