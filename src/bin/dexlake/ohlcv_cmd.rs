//! `dexlake ohlcv` and `dexlake price-stats`: bars and price stats computed on the lake.
//!
//! The library returns an empty frame for a token, pool or range without events; these
//! commands turn that into a one-line error naming what had no events (exit status 1), so a
//! mistyped address is never mistaken for a quiet token. With several tokens, those without
//! events are named on stderr and the others printed.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use dexlake::analytics::{
    BarOptions, EventRule, EventSource, Fill, PriceStatsOptions, Selection, Side, TimeRange, bars,
    event_bars, price_stats,
};
use dexlake::lake::Lake;
use polars::prelude::*;

use crate::Global;

/// Output format of a result frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text columns.
    Table,
    /// Comma-separated values with a header row.
    Csv,
    /// A JSON array of row objects.
    Json,
    /// A Parquet file (needs --out).
    Parquet,
}

/// Output flags shared by the analytics commands.
#[derive(Args, Debug)]
pub struct Output {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Write to this file instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Which events to read.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Which {
    /// One token's bars.
    #[arg(long)]
    token: Option<String>,
    /// Bars of these tokens (comma-separated), as one long frame with `token_address`.
    #[arg(long, value_delimiter = ',')]
    tokens: Option<Vec<String>>,
    /// Bars of the token a pool trades (swaps only).
    #[arg(long)]
    pool: Option<String>,
    /// Bars of every token of the lake.
    #[arg(long)]
    all_tokens: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SourceArg {
    Swaps,
    Trades,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FillArg {
    Skip,
    Null,
    Ffill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SideArg {
    Left,
    Right,
}

impl From<SideArg> for Side {
    fn from(s: SideArg) -> Side {
        match s {
            SideArg::Left => Side::Left,
            SideArg::Right => Side::Right,
        }
    }
}

impl From<SourceArg> for EventSource {
    fn from(s: SourceArg) -> EventSource {
        match s {
            SourceArg::Swaps => EventSource::Swaps,
            SourceArg::Trades => EventSource::Trades,
        }
    }
}

/// Arguments of `dexlake ohlcv`.
#[derive(Args, Debug)]
pub struct OhlcvArgs {
    #[command(flatten)]
    which: Which,
    /// Width of a time bar, seconds (weeks start on Monday).
    #[arg(long, required_unless_present_any = ["ticks", "base_volume", "usd_volume"])]
    interval: Option<i64>,
    /// Tick bars: a bar every N events (instead of --interval).
    #[arg(long, conflicts_with_all = ["interval", "base_volume", "usd_volume"])]
    ticks: Option<u64>,
    /// Volume bars: a bar when its token volume reaches this amount.
    #[arg(long, conflicts_with_all = ["interval", "ticks", "usd_volume"])]
    base_volume: Option<f64>,
    /// Dollar bars: a bar when its USD volume reaches this amount.
    #[arg(long, conflicts_with_all = ["interval", "ticks", "base_volume"])]
    usd_volume: Option<f64>,
    /// First instant included (RFC 3339 or Unix seconds).
    #[arg(long, value_parser = parse_time)]
    from: Option<DateTime<Utc>>,
    /// First instant excluded (RFC 3339 or Unix seconds).
    #[arg(long, value_parser = parse_time)]
    to: Option<DateTime<Utc>>,
    /// Events from swaps or trades.
    #[arg(long, value_enum, default_value = "swaps")]
    source: SourceArg,
    /// Empty buckets: skipped, null prices, or the previous close.
    #[arg(long, value_enum, default_value = "skip")]
    fill: FillArg,
    /// IANA time zone of calendar-day bars (intervals of whole days only).
    #[arg(long)]
    tz: Option<String>,
    /// Shift of the bucket grid, seconds.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    offset: i64,
    /// Closed side of a bucket.
    #[arg(long, value_enum, default_value = "left")]
    closed: SideArg,
    /// Side of a bucket that labels its bar.
    #[arg(long, value_enum, default_value = "left")]
    label: SideArg,
    #[command(flatten)]
    output: Output,
}

/// Arguments of `dexlake price-stats`.
#[derive(Args, Debug)]
pub struct PriceStatsArgs {
    /// Tokens (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    tokens: Vec<String>,
    /// Instant of the stats (RFC 3339 or Unix seconds); default: the latest event in the lake.
    #[arg(long, value_parser = parse_time)]
    now: Option<DateTime<Utc>>,
    /// Events from swaps or trades.
    #[arg(long, value_enum, default_value = "swaps")]
    source: SourceArg,
    #[command(flatten)]
    output: Output,
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(secs) = s.parse::<i64>() {
        return DateTime::from_timestamp(secs, 0).ok_or_else(|| format!("{s}: out of range"));
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{s}: not RFC 3339 or Unix seconds ({e})"))
}

fn existing_lake(global: &Global) -> anyhow::Result<Lake> {
    anyhow::ensure!(
        global.lake.is_dir(),
        "no lake at {} (set --lake or DEXLAKE_LAKE)",
        global.lake.display()
    );
    Lake::open(&global.lake).with_context(|| format!("opening the lake {}", global.lake.display()))
}

fn selection(which: &Which) -> Selection {
    if let Some(t) = &which.token {
        Selection::Token(t.clone())
    } else if let Some(ts) = &which.tokens {
        Selection::Tokens(ts.clone())
    } else if let Some(p) = &which.pool {
        Selection::Pool(p.clone())
    } else {
        Selection::AllTokens
    }
}

fn present_tokens(df: &DataFrame) -> anyhow::Result<std::collections::BTreeSet<String>> {
    Ok(df
        .column("token_address")?
        .str()?
        .iter()
        .flatten()
        .map(str::to_owned)
        .collect())
}

/// Fails when nothing was found, and names the requested tokens that had no events.
fn check_found(
    df: &DataFrame,
    sel: &Selection,
    what: &str,
    global: &Global,
    range: TimeRange,
) -> anyhow::Result<()> {
    let where_ = match (range.from, range.to) {
        (None, None) => String::new(),
        (f, t) => format!(
            " in [{}, {})",
            f.map_or("-∞".into(), |t| t.to_rfc3339()),
            t.map_or("∞".into(), |t| t.to_rfc3339())
        ),
    };
    let lake = global.lake.display();
    if df.height() == 0 {
        let subject = match sel {
            Selection::Token(t) => format!("token {t}"),
            Selection::Tokens(ts) => format!("tokens {}", ts.join(",")),
            Selection::Pool(p) => format!("pool {p}"),
            Selection::AllTokens => "any token".into(),
        };
        bail!("no {what} for {subject} in the lake at {lake}{where_}");
    }
    if let Selection::Tokens(ts) = sel {
        let present = present_tokens(df)?;
        let missing: Vec<&str> = ts
            .iter()
            .filter(|t| !present.contains(*t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            eprintln!(
                "warning: no {what} for {} in the lake at {lake}{where_}",
                missing.join(",")
            );
        }
    }
    Ok(())
}

pub fn ohlcv(global: &Global, args: OhlcvArgs) -> anyhow::Result<ExitCode> {
    let lake = existing_lake(global)?;
    let sel = selection(&args.which);
    let source: EventSource = args.source.into();
    let range = TimeRange {
        from: args.from,
        to: args.to,
    };
    let rule = match (args.ticks, args.base_volume, args.usd_volume) {
        (Some(n), _, _) => Some(EventRule::Ticks(n)),
        (_, Some(v), _) => Some(EventRule::BaseVolume(v)),
        (_, _, Some(v)) => Some(EventRule::UsdVolume(v)),
        _ => None,
    };
    let df = match (rule, args.interval) {
        (Some(rule), _) => event_bars(&lake, source, &sel, range, rule)?,
        (None, Some(width)) => {
            let options = BarOptions {
                width_seconds: width,
                offset_seconds: args.offset,
                closed: args.closed.into(),
                label: args.label.into(),
                fill: match args.fill {
                    FillArg::Skip => Fill::Skip,
                    FillArg::Null => Fill::Null,
                    FillArg::Ffill => Fill::ForwardFill,
                },
                time_zone: args.tz.clone(),
                data_end: None,
            };
            bars(&lake, source, &sel, range, &options)?
        }
        (None, None) => bail!("give --interval, --ticks, --base-volume or --usd-volume"),
    };
    let what = match source {
        EventSource::Swaps => "swaps",
        EventSource::Trades => "trades",
    };
    check_found(&df, &sel, what, global, range)?;
    write_frame(df, &args.output)
}

pub fn price_stats_cmd(global: &Global, args: PriceStatsArgs) -> anyhow::Result<ExitCode> {
    let lake = existing_lake(global)?;
    let sel = Selection::Tokens(args.tokens);
    let source: EventSource = args.source.into();
    let df = price_stats(
        &lake,
        &sel,
        PriceStatsOptions {
            now: args.now,
            source,
        },
    )?;
    let what = match source {
        EventSource::Swaps => "swaps",
        EventSource::Trades => "trades",
    };
    check_found(&df, &sel, what, global, TimeRange::default())?;
    write_frame(df, &args.output)
}

/// One cell as text (CSV and table): numbers in Rust's shortest round-trip form, times in
/// RFC 3339, nulls empty.
fn text(v: &AnyValue) -> String {
    match v {
        AnyValue::Null => String::new(),
        AnyValue::String(s) => (*s).to_owned(),
        AnyValue::StringOwned(s) => s.to_string(),
        AnyValue::Float64(x) => x.to_string(),
        AnyValue::Int64(x) => x.to_string(),
        AnyValue::Boolean(b) => b.to_string(),
        AnyValue::Datetime(t, unit, _) => micros_text(match unit {
            TimeUnit::Nanoseconds => t.div_euclid(1000),
            TimeUnit::Microseconds => *t,
            TimeUnit::Milliseconds => t * 1000,
        }),
        other => other.to_string(),
    }
}

fn micros_text(us: i64) -> String {
    DateTime::from_timestamp_micros(us).map_or_else(
        || us.to_string(),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    )
}

fn json(v: &AnyValue) -> serde_json::Value {
    match v {
        AnyValue::Float64(x) => {
            serde_json::Number::from_f64(*x).map_or(serde_json::Value::Null, Into::into)
        }
        AnyValue::Int64(x) => (*x).into(),
        AnyValue::Boolean(b) => (*b).into(),
        AnyValue::Null => serde_json::Value::Null,
        other => text(other).into(),
    }
}

fn csv_field(s: String) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn write_frame(mut df: DataFrame, output: &Output) -> anyhow::Result<ExitCode> {
    let mut sink: Box<dyn Write> = match &output.out {
        Some(path) => Box::new(BufWriter::new(
            File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let columns = df.columns().to_vec();
    let cell = |c: usize, r: usize| columns[c].get(r).unwrap_or(AnyValue::Null);
    match output.format {
        Format::Parquet => {
            anyhow::ensure!(output.out.is_some(), "--format parquet needs --out FILE");
            ParquetWriter::new(&mut sink).finish(&mut df)?;
        }
        Format::Csv => {
            writeln!(sink, "{}", names.join(","))?;
            for r in 0..df.height() {
                let line: Vec<String> = (0..names.len())
                    .map(|c| csv_field(text(&cell(c, r))))
                    .collect();
                writeln!(sink, "{}", line.join(","))?;
            }
        }
        Format::Json => {
            let rows: Vec<serde_json::Value> = (0..df.height())
                .map(|r| {
                    names
                        .iter()
                        .enumerate()
                        .map(|(c, n)| (n.clone(), json(&cell(c, r))))
                        .collect::<serde_json::Map<_, _>>()
                        .into()
                })
                .collect();
            serde_json::to_writer_pretty(&mut sink, &rows)?;
            writeln!(sink)?;
        }
        Format::Table => {
            let cells: Vec<Vec<String>> = (0..df.height())
                .map(|r| (0..names.len()).map(|c| text(&cell(c, r))).collect())
                .collect();
            let widths: Vec<usize> = (0..names.len())
                .map(|c| {
                    cells
                        .iter()
                        .map(|row| row[c].chars().count())
                        .chain([names[c].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |row: &[String]| {
                row.iter()
                    .zip(&widths)
                    .map(|(s, w)| format!("{s:>w$}"))
                    .collect::<Vec<_>>()
                    .join("  ")
            };
            writeln!(sink, "{}", line(&names))?;
            for row in &cells {
                writeln!(sink, "{}", line(row))?;
            }
        }
    }
    sink.flush()?;
    Ok(ExitCode::SUCCESS)
}
