//! `dexlake ohlcv` and `dexlake price-stats`: bars and price stats computed on the lake.
//!
//! The library returns an empty frame for a token, pool or range without events; these
//! commands turn that into a one-line error naming what had no events (exit status 1), so a
//! mistyped address is never mistaken for a quiet token. With several tokens, those without
//! events are named on stderr and the others printed. Time bars written as Parquet (`--format
//! parquet --out FILE`) go to the file a batch of tokens at a time, so a whole market's bars
//! never sit in memory at once.

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::bail;
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use dexlake::analytics::{
    BarOptions, Edge, EventRule, EventSource, Fill, PriceStatsOptions, Selection, TimeRange, bars,
    bars_in_batches, event_bars, price_stats,
};
use dexlake::query::LakeQuery as _;
use polars::prelude::*;

use crate::output::{Format, Output, ParquetSink, existing_lake};
use crate::status_cmd::Strict;
use crate::{Global, address};

/// Which events to read.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Which {
    /// One token's bars.
    #[arg(long, value_parser = address)]
    token: Option<String>,
    /// Bars of these tokens (comma-separated), as one long frame with `token_address`.
    #[arg(long, value_delimiter = ',', value_parser = address)]
    tokens: Option<Vec<String>>,
    /// Bars of the token a pool trades (swaps only).
    #[arg(long, value_parser = address)]
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

impl From<SideArg> for Edge {
    fn from(s: SideArg) -> Edge {
        match s {
            SideArg::Left => Edge::Left,
            SideArg::Right => Edge::Right,
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

/// The flags of tick, volume and dollar bars, which are labelled with their first event's time:
/// the time bars' grid flags conflict with them rather than be ignored.
const EVENT_BARS: [&str; 3] = ["ticks", "base_volume", "usd_volume"];

/// Arguments of `dexlake ohlcv`.
#[derive(Args, Debug)]
pub struct OhlcvArgs {
    #[command(flatten)]
    which: Which,
    /// Width of a time bar, seconds: 1 to 3155695200000 (100,000 years, so that every label
    /// can be written). Weeks start on Monday.
    #[arg(long, required_unless_present_any = ["ticks", "base_volume", "usd_volume"])]
    interval: Option<i64>,
    /// Tick bars: a bar every N events (instead of --interval).
    #[arg(long, conflicts_with_all = ["interval", "base_volume", "usd_volume"])]
    ticks: Option<u64>,
    /// Volume bars: a bar when its token volume reaches this amount (finite, > 0).
    #[arg(long, conflicts_with_all = ["interval", "ticks", "usd_volume"])]
    base_volume: Option<f64>,
    /// Dollar bars: a bar when its USD volume reaches this amount (finite, > 0).
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
    /// Empty buckets: skipped, null prices, or the previous close (time bars).
    #[arg(long, value_enum, default_value = "skip", conflicts_with_all = EVENT_BARS)]
    fill: FillArg,
    /// IANA time zone of calendar-day bars (intervals of whole days only; time bars).
    #[arg(long, conflicts_with_all = EVENT_BARS)]
    tz: Option<String>,
    /// Shift of the bucket grid, seconds (time bars). Any value: the grid repeats every
    /// interval, so only the remainder modulo the interval moves it.
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        conflicts_with_all = EVENT_BARS
    )]
    offset: i64,
    /// Closed side of a bucket (time bars).
    #[arg(long, value_enum, default_value = "left", conflicts_with_all = EVENT_BARS)]
    closed: SideArg,
    /// Side of a bucket that labels its bar (time bars).
    #[arg(long, value_enum, default_value = "left", conflicts_with_all = EVENT_BARS)]
    label: SideArg,
    #[command(flatten)]
    strict: Strict,
    #[command(flatten)]
    output: Output,
}

/// Arguments of `dexlake price-stats`.
#[derive(Args, Debug)]
pub struct PriceStatsArgs {
    /// Tokens (comma-separated).
    #[arg(long, value_delimiter = ',', required = true, value_parser = address)]
    tokens: Vec<String>,
    /// Instant of the stats (RFC 3339 or Unix seconds); default: the latest event in the lake.
    #[arg(long, value_parser = parse_time)]
    now: Option<DateTime<Utc>>,
    /// Events from swaps or trades.
    #[arg(long, value_enum, default_value = "swaps")]
    source: SourceArg,
    #[command(flatten)]
    strict: Strict,
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

/// The distinct tokens of a frame of bars (a token's bars are consecutive rows).
fn present_tokens(df: &DataFrame) -> anyhow::Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut last: Option<&str> = None;
    for t in df.column("token_address")?.str()?.iter().flatten() {
        if last != Some(t) {
            out.insert(t.to_owned());
            last = Some(t);
        }
    }
    Ok(out)
}

fn what(source: EventSource) -> &'static str {
    match source {
        EventSource::Swaps => "swaps",
        EventSource::Trades => "trades",
    }
}

/// Fails when nothing was found, and names the requested tokens that had no events.
fn check_found(
    df: &DataFrame,
    sel: &Selection,
    what: &str,
    global: &Global,
    range: TimeRange,
) -> anyhow::Result<()> {
    check_found_in(df.height(), || present_tokens(df), sel, what, global, range)
}

/// [`check_found`] from the number of rows and the tokens present.
fn check_found_in(
    rows: usize,
    present: impl FnOnce() -> anyhow::Result<BTreeSet<String>>,
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
    if rows == 0 {
        let subject = match sel {
            Selection::Token(t) => format!("token {t}"),
            Selection::Tokens(ts) => format!("tokens {}", ts.join(",")),
            Selection::Pool(p) => format!("pool {p}"),
            Selection::AllTokens => "any token".into(),
        };
        bail!("no {what} for {subject} in the lake at {lake}{where_}");
    }
    if let Selection::Tokens(ts) = sel {
        let present = present()?;
        let missing: Vec<&str> = ts
            .iter()
            .filter(|t| !present.contains(*t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            crate::output::warning(&format!(
                "no {what} for {} in the lake at {lake}{where_}",
                missing.join(",")
            ));
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
    // What the lake's syncs fetched of the selection: left out of time bars, and warned
    // about (or refused with --strict) before anything is printed, once the bars are made
    // (so a refused argument is the one line on stderr).
    let coverage = dexlake::coverage::of_events(&lake, source, &sel, range)?;
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
                unfetched: coverage.unfetched(),
            };
            if let (Format::Parquet, Some(out)) = (args.output.format, &args.output.out) {
                // Large results go to the file a batch of tokens at a time, so memory holds
                // the events and one batch of bars, never the whole frame.
                args.strict.check(&coverage)?;
                args.output.check_columns()?;
                let mut sink = ParquetSink::new(out);
                let mut present = BTreeSet::new();
                bars_in_batches(&lake, source, &sel, range, &options, 256, |df| {
                    // Only a list of tokens names the missing ones.
                    if matches!(sel, Selection::Tokens(_))
                        && let Ok(tokens) = present_tokens(&df)
                    {
                        present.extend(tokens);
                    }
                    sink.write(&df).map_err(|e| dexlake::Error::Io {
                        action: "writing",
                        path: out.clone(),
                        source: std::io::Error::other(format!("{e:#}")),
                    })
                })?;
                check_found_in(sink.rows, || Ok(present), &sel, what(source), global, range)?;
                sink.finish()?;
                return Ok(ExitCode::SUCCESS);
            }
            bars(&lake, source, &sel, range, &options)?
        }
        (None, None) => bail!("give --interval, --ticks, --base-volume or --usd-volume"),
    };
    check_found(&df, &sel, what(source), global, range)?;
    args.strict.check(&coverage)?;
    args.output.emit(df)
}

pub fn price_stats_cmd(global: &Global, args: PriceStatsArgs) -> anyhow::Result<ExitCode> {
    let lake = existing_lake(global)?;
    let source: EventSource = args.source.into();
    let coverage =
        dexlake::coverage::of_window(&lake, source, &args.tokens, args.now, 30 * 86_400)?;
    let df = price_stats(
        &lake,
        &Selection::Tokens(args.tokens.clone()),
        PriceStatsOptions {
            now: args.now,
            source,
        },
    )?;
    if let (0, Some(now)) = (df.height(), args.now) {
        // Say that the tokens have events, only none by --now.
        let first = first_event_time(&lake, source, &args.tokens)?;
        if let Some(first) = first {
            bail!(
                "no {} of tokens {} at or before --now {} in the lake at {}; their first is at {}",
                what(source),
                args.tokens.join(","),
                rfc3339(now),
                global.lake.display(),
                rfc3339(first)
            );
        }
    }
    let sel = Selection::Tokens(args.tokens);
    check_found(&df, &sel, what(source), global, TimeRange::default())?;
    args.strict.check(&coverage)?;
    args.output.emit(df)
}

/// An instant as RFC 3339 in UTC with `Z`, as the outputs write it.
fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// The time of the first event of `tokens` in the lake, if any.
fn first_event_time(
    lake: &dexlake::lake::Lake,
    source: EventSource,
    tokens: &[String],
) -> anyhow::Result<Option<DateTime<Utc>>> {
    let first = lake
        .query()
        .source(source)
        .tokens(tokens)
        .scan()?
        .select([col("block_time").cast(DataType::Int64).min()])
        .collect()?;
    let micros = first.column("block_time")?.i64()?.get(0);
    Ok(micros.and_then(DateTime::from_timestamp_micros))
}
