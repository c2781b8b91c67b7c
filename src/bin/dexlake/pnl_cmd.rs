//! `dexlake pnl` and `dexlake token-metrics`: wallet PnL, positions, lots, the leaderboard,
//! wallet trading metrics, and token window metrics from the lake. Each is one library call;
//! this module only formats the frames.

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::Args;
use dexlake::analytics::metrics::RatioConfig;
use dexlake::analytics::pnl::{
    self, CostMethod, EquityConfig, Mark, OversellPolicy, PnlConfig, PnlQuery, PnlReport,
};
use dexlake::analytics::token_metrics::{self, Window, parse_span};
use polars::prelude::*;

use crate::output::{Format, ParquetSink, emit, existing_lake};
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
    #[command(flatten)]
    pub strict: Strict,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
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
    /// Write to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn pnl(global: &Global, args: PnlArgs) -> anyhow::Result<ExitCode> {
    let config = PnlConfig {
        method: args.method.parse::<CostMethod>()?,
        oversell: args.oversell.parse::<OversellPolicy>()?,
        mark: args.mark.parse::<Mark>()?,
        dust: args.dust,
        lots: args.lots,
    };
    config.validate()?;
    let lake = existing_lake(global)?;
    // The trades of each wallet asked for (every wallet with --top and --all-wallets):
    // warned about, or refused with --strict, before anything is printed.
    let wallets = args.wallet.as_ref().map(std::slice::from_ref);
    let token = if args.performance {
        None
    } else {
        args.token.as_deref()
    };
    let coverage = dexlake::coverage::of_wallets(&lake, wallets, token)?;
    args.strict.check(&coverage)?;
    if let Some(top) = args.top {
        let board = pnl::leaderboard(&lake, &config, top)?;
        return emit(board, args.format, args.out.as_deref());
    }
    if args.all_wallets {
        let query = PnlQuery {
            wallets: None,
            token: args.token.clone(),
        };
        let table = |report: PnlReport| {
            if args.lots {
                report.lots.unwrap_or_default()
            } else if args.positions {
                report.positions
            } else {
                report.ledgers
            }
        };
        if let (Format::Parquet, Some(out)) = (args.format, &args.out) {
            // Every ledger of the lake can be millions of rows: written a chunk of ledgers at
            // a time, so memory holds the grouped trades and one chunk's tables.
            let mut sink = ParquetSink::new(out);
            let write = |part| {
                sink.write(&table(part)).map_err(|e| dexlake::Error::Io {
                    action: "writing",
                    path: out.clone(),
                    source: std::io::Error::other(format!("{e:#}")),
                })
            };
            // The positions table is built only when it is the one written.
            if args.positions {
                pnl::wallet_pnl_in_batches(&lake, &query, &config, write)?;
            } else {
                pnl::wallet_ledgers_in_batches(&lake, &query, &config, write)?;
            }
            if sink.rows > 0 {
                sink.finish()?;
                return Ok(ExitCode::SUCCESS);
            }
            // No row: the file still gets the table's columns, from the report of no ledger.
            drop(sink);
            let empty = pnl::report(&pnl::LedgerSet::default(), &[], &config)?;
            return emit(table(empty), args.format, args.out.as_deref());
        }
        if args.positions {
            let report = pnl::wallet_pnl(&lake, &query, &config)?;
            return emit(table(report), args.format, args.out.as_deref());
        }
        // The ledgers (or lots) table alone: no positions table is built.
        let all = table(pnl::wallet_ledgers(&lake, &query, &config)?);
        return emit(all, args.format, args.out.as_deref());
    }
    let Some(wallet) = args.wallet else {
        anyhow::bail!("give --wallet W (or --all-wallets, or --top N for the leaderboard)");
    };
    let query = PnlQuery {
        wallets: Some(vec![wallet.clone()]),
        token: args.token.clone(),
    };
    if args.performance {
        let equity = EquityConfig {
            period_seconds: parse_span(&args.period, "period")?,
            initial_capital: args.capital,
            ratios: RatioConfig {
                periods_per_year: args.periods_per_year,
                risk_free: args.risk_free,
            },
        };
        // Refused before the lake is read.
        equity.validate()?;
        let perf = pnl::lake_wallet_performance(&lake, &wallet, &config, &equity)?;
        if perf.curve.height() == 0 {
            crate::output::note(&format!("no trades of wallet {wallet} in the lake"));
        }
        let df = if args.curve { perf.curve } else { perf.metrics };
        return emit(df, args.format, args.out.as_deref());
    }
    let report = pnl::wallet_pnl(&lake, &query, &config)?;
    if report.ledgers.height() == 0 {
        let of = args
            .token
            .map(|t| format!(" in token {t}"))
            .unwrap_or_default();
        crate::output::note(&format!("no trades of wallet {wallet}{of} in the lake"));
    }
    let df = if args.lots {
        report.lots.unwrap_or_default()
    } else if args.positions {
        report.positions
    } else {
        report.ledgers
    };
    emit(df, args.format, args.out.as_deref())
}

pub fn token_metrics(global: &Global, args: TokenMetricsArgs) -> anyhow::Result<ExitCode> {
    let windows = if args.window.is_empty() {
        Window::service_windows()
    } else {
        args.window
            .iter()
            .map(|w| Window::parse(w))
            .collect::<dexlake::Result<Vec<_>>>()?
    };
    let lake = existing_lake(global)?;
    let widest = windows.iter().map(|w| w.seconds).max().unwrap_or(0);
    let coverage = dexlake::coverage::of_window(
        &lake,
        dexlake::analytics::EventSource::Trades,
        std::slice::from_ref(&args.token),
        args.now,
        widest,
    )?;
    args.strict.check(&coverage)?;
    let df = token_metrics::token_metrics(&lake, &args.token, &windows, args.now)?;
    let trades: i64 = df
        .column("trade_count")
        .ok()
        .and_then(|c| c.i64().ok().and_then(|c| c.max()))
        .unwrap_or(0);
    if trades == 0 {
        crate::output::note(&format!(
            "no trades of token {} in the lake's windows",
            args.token
        ));
    }
    emit(df, args.format, args.out.as_deref())
}
