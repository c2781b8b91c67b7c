//! `dexlake pnl` and `dexlake token-metrics`: wallet PnL, positions, lots, the leaderboard,
//! wallet trading metrics, and token window metrics from the lake. Each is one library call;
//! this module only formats the frames.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use dexlake::analytics::metrics::RatioConfig;
use dexlake::analytics::pnl::{
    self, CostMethod, EquityConfig, Mark, OversellPolicy, PnlConfig, PnlQuery,
};
use dexlake::analytics::token_metrics::{self, Window, parse_window};
use dexlake::lake::Lake;
use polars::prelude::*;
use serde_json::{Map, Value};

use crate::Global;

/// Output formats of the analytics commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for a terminal.
    Table,
    /// Comma-separated values with a header.
    Csv,
    /// A JSON array of objects.
    Json,
    /// A Parquet file (needs --out).
    Parquet,
}

/// Arguments of `dexlake pnl`.
#[derive(Args, Debug)]
pub struct PnlArgs {
    /// Wallet address (required unless --top is given).
    #[arg(long)]
    pub wallet: Option<String>,
    /// Only this token.
    #[arg(long)]
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
    /// Period of the equity curve (1d, 1h, 1w, ...).
    #[arg(long, default_value = "1d")]
    pub period: String,
    /// Periods per year of the annualised ratios (365 for daily periods).
    #[arg(long, default_value_t = 365.0)]
    pub periods_per_year: f64,
    /// Risk-free rate per period.
    #[arg(long, default_value_t = 0.0)]
    pub risk_free: f64,
    /// Starting capital of the equity curve, USD (default: the wallet's total buy cost).
    #[arg(long)]
    pub capital: Option<f64>,
    /// Rank every wallet of the lake by total PnL and print the first N.
    #[arg(long)]
    pub top: Option<usize>,
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
    #[arg(long)]
    pub token: String,
    /// Windows, comma-separated (1m, 5m, 1h, 6h, 1d, 7d or any length like 30d); default the
    /// service's six.
    #[arg(long, value_delimiter = ',')]
    pub window: Vec<String>,
    /// End of the windows (RFC 3339); default the lake's latest trade time.
    #[arg(long)]
    pub now: Option<DateTime<Utc>>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn existing_lake(global: &Global) -> anyhow::Result<Lake> {
    anyhow::ensure!(
        global.lake.is_dir(),
        "no lake at {} (set --lake or DEXLAKE_LAKE)",
        global.lake.display()
    );
    Lake::open(&global.lake).with_context(|| format!("opening the lake {}", global.lake.display()))
}

pub fn pnl(global: &Global, args: PnlArgs) -> anyhow::Result<ExitCode> {
    let config = PnlConfig {
        method: args.method.parse::<CostMethod>()?,
        oversell: args.oversell.parse::<OversellPolicy>()?,
        mark: args.mark.parse::<Mark>()?,
        dust: args.dust,
        lots: args.lots,
    };
    anyhow::ensure!(
        args.dust.is_finite() && args.dust >= 0.0,
        "invalid dust: {} is not a finite quantity ≥ 0",
        args.dust
    );
    let lake = existing_lake(global)?;
    if let Some(top) = args.top {
        let board = pnl::leaderboard(&lake, &config, top)?;
        return emit(board, args.format, args.out.as_deref());
    }
    let Some(wallet) = args.wallet else {
        anyhow::bail!("give --wallet W (or --top N for the leaderboard)");
    };
    let query = PnlQuery {
        wallets: Some(vec![wallet.clone()]),
        token: args.token.clone(),
    };
    if args.performance {
        let period = parse_window(&args.period)?;
        let (trades, swaps) = pnl::lake_frames(&lake, &PnlQuery::default())?;
        let perf = pnl::wallet_performance(
            &trades,
            Some(&swaps),
            &wallet,
            &config,
            &EquityConfig {
                period_seconds: period,
                initial_capital: args.capital,
                ratios: RatioConfig {
                    periods_per_year: args.periods_per_year,
                    risk_free: args.risk_free,
                },
            },
        )?;
        if perf.curve.height() == 0 {
            eprintln!("note: no trades of wallet {wallet} in the lake");
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
        eprintln!("note: no trades of wallet {wallet}{of} in the lake");
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
    let df = token_metrics::token_metrics(&lake, &args.token, &windows, args.now)?;
    let trades: i64 = df
        .column("trade_count")
        .ok()
        .and_then(|c| c.i64().ok().and_then(|c| c.max()))
        .unwrap_or(0);
    if trades == 0 {
        eprintln!(
            "note: no trades of token {} in the lake's windows",
            args.token
        );
    }
    emit(df, args.format, args.out.as_deref())
}

/// A column flattened for output: its name (`parent.child` for struct fields), the JSON path,
/// and its cells.
struct OutColumn {
    name: String,
    path: Vec<String>,
    cells: Vec<Value>,
}

fn cells(s: &Series) -> anyhow::Result<Vec<Value>> {
    let dtype = s.dtype().clone();
    Ok(match dtype {
        DataType::String => s
            .str()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        DataType::Boolean => s
            .bool()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        DataType::Float32 | DataType::Float64 => s
            .cast(&DataType::Float64)?
            .f64()?
            .iter()
            .map(|v| match v {
                Some(x) if x.is_finite() => Value::from(x),
                Some(x) => Value::from(x.to_string()),
                None => Value::Null,
            })
            .collect(),
        DataType::Datetime(unit, _) => {
            let scale = match unit {
                TimeUnit::Nanoseconds => 1_000,
                TimeUnit::Microseconds => 1,
                TimeUnit::Milliseconds => -1_000,
            };
            s.cast(&DataType::Int64)?
                .i64()?
                .iter()
                .map(|v| {
                    let micros = v.map(|v| match scale {
                        1_000 => v / 1_000,
                        -1_000 => v * 1_000,
                        _ => v,
                    });
                    micros
                        .and_then(DateTime::from_timestamp_micros)
                        .map_or(Value::Null, |t| Value::from(t.to_rfc3339()))
                })
                .collect()
        }
        d if d.is_integer() => s
            .cast(&DataType::Int64)?
            .i64()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        _ => s
            .cast(&DataType::String)?
            .str()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
    })
}

fn flatten(df: &DataFrame) -> anyhow::Result<Vec<OutColumn>> {
    let mut out = Vec::new();
    for c in df.columns() {
        let s = c.as_materialized_series();
        if let DataType::Struct(_) = s.dtype() {
            for f in s.struct_()?.fields_as_series() {
                out.push(OutColumn {
                    name: format!("{}.{}", s.name(), f.name()),
                    path: vec![s.name().to_string(), f.name().to_string()],
                    cells: cells(&f)?,
                });
            }
        } else {
            out.push(OutColumn {
                name: s.name().to_string(),
                path: vec![s.name().to_string()],
                cells: cells(s)?,
            });
        }
    }
    Ok(out)
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn csv_field(s: String) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn render(df: &DataFrame, format: Format) -> anyhow::Result<Vec<u8>> {
    let cols = flatten(df)?;
    let rows = df.height();
    let mut out = String::new();
    match format {
        Format::Csv => {
            let header: Vec<String> = cols.iter().map(|c| csv_field(c.name.clone())).collect();
            out.push_str(&header.join(","));
            out.push('\n');
            for r in 0..rows {
                let line: Vec<String> = cols.iter().map(|c| csv_field(text(&c.cells[r]))).collect();
                out.push_str(&line.join(","));
                out.push('\n');
            }
        }
        Format::Json => {
            let mut items = Vec::with_capacity(rows);
            for r in 0..rows {
                let mut obj = Map::new();
                for c in &cols {
                    let mut target = &mut obj;
                    for p in &c.path[..c.path.len() - 1] {
                        target = target
                            .entry(p.clone())
                            .or_insert_with(|| Value::Object(Map::new()))
                            .as_object_mut()
                            .context("a struct column's parent is an object")?;
                    }
                    target.insert(c.path[c.path.len() - 1].clone(), c.cells[r].clone());
                }
                items.push(Value::Object(obj));
            }
            out = serde_json::to_string_pretty(&items)?;
            out.push('\n');
        }
        Format::Table if cols.len() > 12 => {
            // Wide frames read better as one block of `name value` lines per row.
            let w = cols.iter().map(|c| c.name.len()).max().unwrap_or(0);
            for r in 0..rows {
                if r > 0 {
                    out.push('\n');
                }
                for c in &cols {
                    out.push_str(&format!("{:w$}  {}\n", c.name, text(&c.cells[r])));
                }
            }
        }
        Format::Table => {
            let texts: Vec<Vec<String>> = cols
                .iter()
                .map(|c| c.cells.iter().map(text).collect())
                .collect();
            let widths: Vec<usize> = cols
                .iter()
                .zip(&texts)
                .map(|(c, t)| {
                    t.iter()
                        .map(String::len)
                        .max()
                        .unwrap_or(0)
                        .max(c.name.len())
                })
                .collect();
            let line = |cells: Vec<&str>| -> String {
                let parts: Vec<String> = cells
                    .iter()
                    .zip(&widths)
                    .map(|(s, w)| format!("{s:w$}"))
                    .collect();
                format!("{}\n", parts.join("  ").trim_end())
            };
            out.push_str(&line(cols.iter().map(|c| c.name.as_str()).collect()));
            for r in 0..rows {
                out.push_str(&line(texts.iter().map(|t| t[r].as_str()).collect()));
            }
        }
        Format::Parquet => unreachable!("Parquet is written by `emit`"),
    }
    Ok(out.into_bytes())
}

fn emit(mut df: DataFrame, format: Format, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    if format == Format::Parquet {
        let path = out.context("--format parquet needs --out FILE")?;
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let written = ParquetWriter::new(file).finish(&mut df);
        anyhow::Context::with_context(written, || format!("writing {}", path.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let bytes = render(&df, format)?;
    match out {
        Some(path) => {
            std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?
        }
        None => std::io::stdout().lock().write_all(&bytes)?,
    }
    Ok(ExitCode::SUCCESS)
}
