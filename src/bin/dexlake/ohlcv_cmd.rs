//! `dexlake ohlcv` and `dexlake price-stats`: bars and price stats computed on the lake.
//!
//! Each is one question of the lake's query (`dexlake::query`), which decides what the answer
//! means: a token, pool or range without events is a one-line "no data" error, tokens of a
//! list without events and incomplete coverage are warnings (or, with `--strict`, an error).
//! These commands turn flags into the query and print the answer. Time bars written as
//! Parquet (`--format parquet --out FILE`) go to the file a batch of tokens at a time, so a
//! whole market's bars never sit in memory at once.

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use dexlake::analytics::{Edge, Fill};
use dexlake::query::args::time as parse_time;
use dexlake::query::{Bars, LakeQuery as _, Query};

use crate::open_lake::{AsOfArg, EventsAtOnceArg, reading_lake};
use crate::output::{Format, Output};
use crate::parquet_out::ParquetSink;
use crate::provenance::notes;
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

/// What `price-stats` reads: events, or the stored price history of one EVM chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StatsSourceArg {
    Swaps,
    Trades,
    /// The EVM price history of one chain (`--chain-id`).
    PriceHistory,
}

/// What `ohlcv` reads: events, or a stored series (time bars only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BarsSourceArg {
    Swaps,
    Trades,
    /// The EVM price history of one chain (`--chain-id`).
    PriceHistory,
    /// The altchain candles.
    Candles,
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

impl SideArg {
    /// The edge this flag names, by the library's rule (`--closed` or `--label`).
    fn edge(self, argument: &str) -> dexlake::Result<Edge> {
        let name = self.to_possible_value().expect("every side has a name");
        Edge::parse(name.get_name(), argument)
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
    /// Events from swaps or trades, or time bars resampled from a stored series: the EVM
    /// price history of `--chain-id` or the altchain candles.
    #[arg(long, value_enum, default_value = "swaps")]
    source: BarsSourceArg,
    /// The EVM chain of `--source price-history` (required with it, refused otherwise).
    #[arg(long)]
    chain_id: Option<i64>,
    /// The stored interval of the series to resample, seconds (`--source price-history` or
    /// `candles`); `--interval` must be a multiple of it. Default: the finest stored interval
    /// that divides `--interval`.
    #[arg(long)]
    series_interval: Option<i64>,
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
    #[command(flatten)]
    pub as_of: AsOfArg,
    #[command(flatten)]
    events_at_once: EventsAtOnceArg,
}

/// Arguments of `dexlake price-stats`.
#[derive(Args, Debug)]
pub struct PriceStatsArgs {
    /// Tokens (comma-separated).
    #[arg(long, value_delimiter = ',', required = true, value_parser = address)]
    tokens: Vec<String>,
    /// Instant of the stats (RFC 3339 or Unix seconds); default: the latest event in the lake
    /// (a price history: the end of its latest point's interval; `--now` must then be a
    /// multiple of the series interval).
    #[arg(long, value_parser = parse_time)]
    now: Option<DateTime<Utc>>,
    /// Events from swaps or trades, or the stored EVM price history of `--chain-id`
    /// (docs/series.md, "Price stats from a series").
    #[arg(long, value_enum, default_value = "swaps")]
    source: StatsSourceArg,
    /// The EVM chain of `--source price-history` (required with it, refused otherwise).
    #[arg(long)]
    chain_id: Option<i64>,
    /// The stored interval of the price history to read, seconds (`--source price-history`);
    /// default: the finest stored. Periods it does not divide have empty figures.
    #[arg(long)]
    series_interval: Option<i64>,
    #[command(flatten)]
    strict: Strict,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    pub as_of: AsOfArg,
    #[command(flatten)]
    events_at_once: EventsAtOnceArg,
}

/// The query of `--token`, `--tokens`, `--pool` or `--all-tokens`.
fn select<'a>(query: Query<'a>, which: &Which) -> Query<'a> {
    if let Some(t) = &which.token {
        query.token(t)
    } else if let Some(ts) = &which.tokens {
        query.tokens(ts)
    } else if let Some(p) = &which.pool {
        query.pool(p)
    } else {
        query
    }
}

pub fn ohlcv(global: &Global, args: OhlcvArgs) -> anyhow::Result<ExitCode> {
    let lake = reading_lake(global, &args.as_of)?;
    let mut query = args
        .events_at_once
        .apply(select(lake.query(), &args.which).strict(args.strict.strict));
    let source = args
        .source
        .to_possible_value()
        .expect("every source has a name");
    query = query.bars_source(source.get_name(), args.chain_id)?;
    if let Some(seconds) = args.series_interval {
        query = query.series_interval(seconds);
    }
    if let Some(from) = args.from {
        query = query.since(from);
    }
    if let Some(to) = args.to {
        query = query.until(to);
    }
    let time_bars = args.ticks.is_none() && args.base_volume.is_none() && args.usd_volume.is_none();
    let bars = match (args.ticks, args.base_volume, args.usd_volume, args.interval) {
        (Some(n), _, _, _) => Bars::ticks(n),
        (_, Some(v), _, _) => Bars::base_volume(v),
        (_, _, Some(v), _) => Bars::usd_volume(v),
        (None, None, None, Some(width)) => {
            let fill = args
                .fill
                .to_possible_value()
                .expect("every fill has a name");
            let bars = Bars::every(width)
                .offset(args.offset)
                .closed(args.closed.edge("closed")?)
                .label(args.label.edge("label")?)
                .fill(fill.get_name().parse::<Fill>()?);
            match args.tz.clone() {
                Some(zone) => bars.time_zone(zone),
                None => bars,
            }
        }
        (None, None, None, None) => {
            return Err(dexlake::Error::InvalidArgument {
                argument: "interval".into(),
                reason: "give --interval, --ticks, --base-volume or --usd-volume".into(),
            }
            .into());
        }
    };
    if let (true, Format::Parquet, Some(out)) = (time_bars, args.output.format, &args.output.out) {
        // Large results go to the file a batch of tokens at a time, so memory holds the
        // events and one batch of bars, never the whole frame.
        args.output.check_columns()?;
        let mut sink = ParquetSink::new(out);
        let answer = query.bars_to(bars, 256, |df| sink.write_frame(&df))?;
        notes(&answer);
        sink.finish(args.output.metadata(&answer)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let answer = query.bars_covered(bars)?;
    args.output.emit(answer)
}

pub fn price_stats_cmd(global: &Global, args: PriceStatsArgs) -> anyhow::Result<ExitCode> {
    let lake = reading_lake(global, &args.as_of)?;
    let source = args
        .source
        .to_possible_value()
        .expect("every source has a name");
    let mut query = args
        .events_at_once
        .apply(lake.query())
        .tokens(&args.tokens)
        .strict(args.strict.strict)
        .bars_source(source.get_name(), args.chain_id)?;
    if let Some(seconds) = args.series_interval {
        query = query.series_interval(seconds);
    }
    let answer = query.price_stats_covered(args.now)?;
    args.output.emit(answer)
}
