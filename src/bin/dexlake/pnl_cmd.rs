//! `dexlake pnl` and `dexlake token-metrics`: wallet PnL, positions, lots, the leaderboard,
//! wallet trading metrics, and token window metrics from the lake. Each is one question of the
//! lake's query; this module turns flags into it and prints the answer and its warnings.

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::Args;
use dexlake::analytics::metrics::RatioConfig;
use dexlake::analytics::pnl::{
    CostMethod, EquityConfig, Mark, OversellPolicy, PnlConfig, PnlTable,
};
use dexlake::analytics::token_metrics::parse_span;
use dexlake::query::LakeQuery as _;

use crate::open_lake::{AsOfArg, reading_lake};
use crate::output::{Format, emit};
use crate::parquet_out::ParquetSink;
use crate::provenance::{metadata, notes};
use crate::status_cmd::Strict;
use crate::{Global, address};

/// Arguments of `dexlake pnl`.
#[derive(Args, Debug)]
pub struct PnlArgs {
    /// Wallet address (required unless --top is given).
    #[arg(long, value_parser = address)]
    pub wallet: Option<String>,
    /// Only this token.
    #[arg(long, value_parser = address)]
    pub token: Option<String>,
    /// Cost-basis method: fifo, lifo, hifo or avg.
    #[arg(long, default_value = "fifo")]
    pub method: String,
    /// Price of the open quantity: `latest` (the token's latest trade price in the lake) or a
    /// USD price.
    #[arg(long, default_value = "latest")]
    pub mark: String,
    /// Selling more than is held: error, zero-cost or ignore.
    #[arg(long, default_value = "zero-cost")]
    pub oversell: String,
    /// A position is open while its quantity is above this threshold.
    #[arg(long, default_value_t = 0.0)]
    pub dust: f64,
    /// Print the lots table (which buy lots each sell consumed) instead of the positions.
    #[arg(long, conflicts_with_all = ["positions", "performance", "top"])]
    pub lots: bool,
    /// Print one row per position (opened, closed, realized) instead of one per token.
    #[arg(long, conflicts_with_all = ["performance", "top"])]
    pub positions: bool,
    /// Print the wallet's trading metrics (Sharpe, Sortino, drawdown, win rate, profit factor)
    /// of its equity curve marked at each period's close.
    #[arg(long, conflicts_with = "top")]
    pub performance: bool,
    /// With --performance, print the equity curve itself.
    #[arg(long, requires = "performance")]
    pub curve: bool,
    /// Period of the equity curve (1d, 1h, 1w, ...; at most 106751991d).
    #[arg(long, default_value = "1d")]
    pub period: String,
    /// Periods per year of the annualised ratios (365 for daily periods): finite, > 0.
    #[arg(long, default_value_t = 365.0, allow_negative_numbers = true)]
    pub periods_per_year: f64,
    /// Risk-free rate per period, a fraction (0.0001 is 0.01 %): finite, above -1, at most
    /// 1e6.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub risk_free: f64,
    /// Starting capital of the equity curve, USD, finite and > 0 (default: the wallet's total
    /// buy cost).
    #[arg(long, allow_negative_numbers = true)]
    pub capital: Option<f64>,
    /// Rank every wallet of the lake by total PnL and print the first N.
    #[arg(long)]
    pub top: Option<usize>,
    /// Every wallet of the lake instead of one: one row per (wallet, token) (or the positions
    /// or lots of every wallet).
    #[arg(long, conflicts_with_all = ["wallet", "performance", "top"])]
    pub all_wallets: bool,
    /// With `--all-wallets --format parquet`: most events held in memory at once (about 60
    /// bytes each); a lake with more is read in parts of whole wallets, through temporary
    /// spill files, with the same table [default: 16777216].
    #[arg(long, conflicts_with_all = ["wallet", "performance", "top"])]
    pub events_at_once: Option<usize>,
    #[command(flatten)]
    pub strict: Strict,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of standard output (required with `--format parquet`,
    /// refused before any work).
    #[arg(long, required_if_eq("format", "parquet"))]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

/// Arguments of `dexlake token-metrics`.
#[derive(Args, Debug)]
pub struct TokenMetricsArgs {
    /// Token address.
    #[arg(long, value_parser = address)]
    pub token: String,
    /// Windows, comma-separated (1m, 5m, 1h, 6h, 1d, 7d or any length like 30d, at most
    /// 106751991d); default the service's six.
    #[arg(long, value_delimiter = ',')]
    pub window: Vec<String>,
    /// End of the windows (RFC 3339); default the lake's latest trade time.
    #[arg(long)]
    pub now: Option<DateTime<Utc>>,
    #[command(flatten)]
    pub strict: Strict,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of standard output (required with `--format parquet`,
    /// refused before any work).
    #[arg(long, required_if_eq("format", "parquet"))]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

pub fn pnl(global: &Global, args: PnlArgs) -> anyhow::Result<ExitCode> {
    let config = PnlConfig {
        method: args.method.parse::<CostMethod>()?,
        oversell: args.oversell.parse::<OversellPolicy>()?,
        mark: args.mark.parse::<Mark>()?,
        dust: args.dust,
        lots: args.lots,
    };
    // Refused before the lake is opened.
    config.validate()?;
    let lake = reading_lake(global, &args.as_of)?;
    let mut query = lake.query().strict(args.strict.strict);
    if let Some(events) = args.events_at_once {
        query = query.events_at_once(events);
    }
    if let Some(top) = args.top {
        let answer = query.leaderboard_covered(top, &config)?;
        return emit(answer, args.format, args.out.as_deref());
    }
    let table = if args.lots {
        PnlTable::Lots
    } else if args.positions {
        PnlTable::Positions
    } else {
        PnlTable::Ledgers
    };
    let query = match &args.token {
        Some(token) if !args.performance => query.token(token),
        _ => query,
    };
    if args.all_wallets {
        if let (Format::Parquet, Some(out)) = (args.format, &args.out) {
            // Every ledger of the lake can be millions of rows: written a chunk of ledgers at
            // a time, so memory holds the grouped trades and one chunk's tables.
            let mut sink = ParquetSink::new(out);
            let answer = query.pnl_table_to(&config, table, |df| sink.write_frame(&df))?;
            notes(&answer);
            sink.finish(metadata(&answer, args.format)?)?;
            return Ok(ExitCode::SUCCESS);
        }
        let answer = query.pnl_table(&config, table)?;
        return emit(answer, args.format, args.out.as_deref());
    }
    let Some(wallet) = args.wallet else {
        return Err(dexlake::Error::InvalidArgument {
            argument: "wallet".into(),
            reason: "give --wallet W (or --all-wallets, or --top N for the leaderboard)".into(),
        }
        .into());
    };
    let query = query.wallet(wallet);
    if args.performance {
        let equity = EquityConfig {
            period_seconds: parse_span(&args.period, "period")?,
            initial_capital: args.capital,
            ratios: RatioConfig {
                periods_per_year: args.periods_per_year,
                risk_free: args.risk_free,
            },
        };
        let answer = query
            .performance_covered(&config, &equity)?
            .map(|perf| if args.curve { perf.curve } else { perf.metrics });
        return emit(answer, args.format, args.out.as_deref());
    }
    let answer = query.pnl_table(&config, table)?;
    emit(answer, args.format, args.out.as_deref())
}

pub fn token_metrics(global: &Global, args: TokenMetricsArgs) -> anyhow::Result<ExitCode> {
    let windows: Vec<&str> = args.window.iter().map(String::as_str).collect();
    let lake = reading_lake(global, &args.as_of)?;
    let answer = lake
        .query()
        .token(&args.token)
        .strict(args.strict.strict)
        .token_metrics_covered(&windows, args.now)?;
    emit(answer, args.format, args.out.as_deref())
}
