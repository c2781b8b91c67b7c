//! The daily report: the lake's headline analytics as one HTML page with PNG charts.
//!
//! [`build`] computes everything from the lake (never the network) into a [`Report`]:
//! - the report's day: the last [`ReportConfig::window_seconds`] of the lake's events, ending
//!   with its newest event;
//! - the most traded tokens of that day, ranked by USD volume, each with its time bars
//!   ([`analytics::bars`](crate::analytics::bars)) and a row of price stats
//!   ([`analytics::price_stats`](crate::analytics::price_stats));
//! - the wallet PnL leaderboard ([`Query::leaderboard_with`](crate::query::Query::leaderboard_with));
//! - a screener: a search-profiles request answered from the lake's latest profile snapshot
//!   ([`analytics::screener::search`](crate::analytics::screener::search));
//! - for each EVM chain whose price history the lake stores, its most traded tokens over the
//!   last day of that history, with bars resampled from the stored series
//!   ([`Query::price_history`](crate::query::Query::price_history)) and price stats computed
//!   from it (`dexlake ohlcv` and `dexlake price-stats --source price-history`);
//! - a "Data" section: the coverage of the charted tokens over the period
//!   ([`coverage::of_events`](crate::coverage::of_events), what the CLI warns about), and the
//!   data-quality findings of the lake ([`Query::check`](crate::query::Query::check),
//!   what `dexlake check` prints), each kind's count and a couple of examples.
//!
//! [`Report::write`] then draws the charts (candlesticks with buy and sell volume per token,
//! the leaderboard's total PnL) as PNG files with plotters and writes `index.html` beside them.
//! The page has no script and loads nothing but its own images.
//!
//! ```no_run
//! # fn main() -> dexlake::Result<()> {
//! use dexlake::lake::Lake;
//! use dexlake::report::{self, ReportConfig};
//!
//! let lake = Lake::open("lake")?;
//! let report = report::build(&lake, &ReportConfig::default())?;
//! let index = report.write("report")?;
//! println!("{}\nwrote {}", report.summary(), index.display());
//! # Ok(())
//! # }
//! ```
//!
//! A lake without the events of a section gives that section a note instead of a chart; a lake
//! without any swaps (or trades, with [`ReportConfig::source`]) is an error, since the report
//! would say nothing.

mod charts;
mod evm;
mod html;

pub use evm::EvmChainSection;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};
use polars::prelude::*;

use crate::analytics::events::latest_event_time;
use crate::analytics::pnl::PnlConfig;
use crate::analytics::quality::CheckReport;
use crate::analytics::screener::{self as local_search, ProfileSnapshot};
use crate::analytics::{BarOptions, EventSource, Selection, TimeRange, load_events, ohlcv};
use crate::api::profile_query::SearchRequest;
use crate::lake::{Dataset, Lake};
use crate::query::LakeQuery as _;
use crate::search::SearchPage;
use crate::{Error, Result};

/// What the report shows.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// The page's title.
    pub title: String,
    /// Events the bars, volumes and price stats come from.
    pub source: EventSource,
    /// Length of the report's period, ending with the lake's newest event (a day by default).
    pub window_seconds: i64,
    /// Width of the candles, in seconds (15 minutes by default).
    pub bar_seconds: i64,
    /// How many of the period's most traded tokens get a chart.
    pub top_tokens: usize,
    /// Rows of the PnL leaderboard.
    pub leaderboard_rows: usize,
    /// Cost-basis method, mark and oversell policy of the leaderboard.
    pub pnl: PnlConfig,
    /// The screener: a search-profiles request answered locally.
    pub screener: SearchRequest,
    /// Width of the EVM tokens' bars, resampled from their price history, in seconds (an
    /// hour by default; a multiple of the stored interval).
    pub evm_bar_seconds: i64,
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            title: "dexlake daily report".into(),
            source: EventSource::Swaps,
            window_seconds: 86_400,
            bar_seconds: 900,
            top_tokens: 6,
            leaderboard_rows: 20,
            pnl: PnlConfig::default(),
            screener: default_screener(),
            evm_bar_seconds: 3600,
        }
    }
}

/// The default screener: liquid tokens that traded in the last hour, most hourly volume first.
pub fn default_screener() -> SearchRequest {
    serde_json::from_value(serde_json::json!({
        "filter": {
            "market.liquidity": {"$gte": 10000},
            "metrics.1h.trade_count": {"$gt": 0}
        },
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
        "options": {
            "include_metadata": true,
            "include_market": true,
            "include_labels": true,
            "include_metrics": ["1h", "1d"]
        },
        "limit": 20
    }))
    .expect("the default screener is a valid search request")
}

/// One of the period's most traded tokens.
#[derive(Debug, Clone)]
pub struct TokenSection {
    /// Its address.
    pub token_address: String,
    /// Its symbol, from the latest profile snapshot when the lake has one.
    pub symbol: Option<String>,
    /// USD volume of its events in the period.
    pub usd_volume: f64,
    /// Its events in the period (for a token of an EVM chain, its price-history points).
    pub events: usize,
    /// Its time bars over the period (the columns of [`ohlcv::BAR_COLUMNS`]).
    pub bars: DataFrame,
}

impl TokenSection {
    /// The symbol, or a short form of the address.
    pub fn label(&self) -> String {
        match &self.symbol {
            Some(s) if !s.is_empty() => s.clone(),
            _ => short(&self.token_address),
        }
    }

    /// Close of the last bar.
    pub fn last_close(&self) -> Option<f64> {
        let close = self.bars.column("close").ok()?.f64().ok()?;
        close.iter().rev().flatten().next()
    }
}

/// Everything the report shows, computed from one lake.
#[derive(Debug, Clone)]
pub struct Report {
    /// The page's title.
    pub title: String,
    /// When the report was computed.
    pub generated_at: DateTime<Utc>,
    /// The lake it was computed from.
    pub lake: PathBuf,
    /// Rows per dataset in the lake.
    pub datasets: Vec<(Dataset, u64)>,
    /// The period `[from, to)`: it ends just after the lake's newest event.
    pub period: TimeRange,
    /// Width of the bars, in seconds.
    pub bar_seconds: i64,
    /// Width of the EVM tokens' bars, in seconds.
    pub evm_bar_seconds: i64,
    /// The period's most traded tokens, most volume first.
    pub tokens: Vec<TokenSection>,
    /// Price stats of those tokens at the end of the period
    /// (the columns of [`analytics::price_stats`](crate::analytics::price_stats)).
    pub price_stats: DataFrame,
    /// The PnL leaderboard ([`Query::leaderboard_with`](crate::query::Query::leaderboard_with)'s columns).
    pub leaderboard: DataFrame,
    /// The screener's request.
    pub screener_request: SearchRequest,
    /// Its answer over the latest profile snapshot; `None` when the lake has no profiles.
    pub screener: Option<SearchPage>,
    /// The profile snapshot the screener ran on.
    pub snapshot: Option<DateTime<Utc>>,
    /// The EVM chains of the lake's price history, in chain order (empty when it holds none).
    pub evm: Vec<EvmChainSection>,
    /// What the syncs did not fetch of the charted tokens' events over the period, one line
    /// each (the "Data" section; empty when all of it was fetched).
    pub coverage: Vec<String>,
    /// The data-quality findings of the lake (the "Data" section).
    pub quality: CheckReport,
    /// What a section could not show, and why.
    pub notes: Vec<String>,
}

/// Computes the report from the lake.
pub fn build(lake: &Lake, config: &ReportConfig) -> Result<Report> {
    if config.window_seconds <= 0 || config.bar_seconds <= 0 || config.evm_bar_seconds <= 0 {
        return Err(Error::InvalidArgument {
            argument: "report period".into(),
            reason: format!(
                "window ({} s) and bar widths ({} s, EVM {} s) must be positive",
                config.window_seconds, config.bar_seconds, config.evm_bar_seconds
            ),
        });
    }
    let mut notes = Vec::new();
    let datasets = Dataset::ALL
        .iter()
        .map(|&d| Ok((d, lake.row_count(d)?)))
        .collect::<Result<Vec<_>>>()?;
    let Some(last) = latest_event_time(lake, config.source)? else {
        return Err(Error::Lake {
            path: lake.root().to_owned(),
            message: format!(
                "no {} to report on: sync some first",
                config.source.dataset().name()
            ),
        });
    };
    // The latest altchain profile snapshot: the screener and the tokens' symbols read it (the
    // search operation has only altchain profiles).
    let has_profiles = datasets
        .iter()
        .any(|&(d, rows)| d == Dataset::TokenProfiles && rows > 0);
    let latest = if has_profiles {
        local_search::snapshots(lake)?.last().copied()
    } else {
        None
    };
    let to = last + Duration::microseconds(1);
    let period = TimeRange {
        from: Some(to - Duration::seconds(config.window_seconds)),
        to: Some(to),
    };

    // The period's most traded tokens and their bars, from one read of the events.
    let mut events = load_events(lake, config.source, &Selection::AllTokens, period)?;
    let volume = |e: &crate::analytics::Events| e.usd.iter().sum::<f64>();
    events.sort_by(|a, b| {
        volume(&b.events)
            .total_cmp(&volume(&a.events))
            .then_with(|| a.token.cmp(&b.token))
    });
    events.truncate(config.top_tokens);
    let symbols = latest.map_or_else(HashMap::new, |at| symbols(lake, at, &mut notes));
    let options = BarOptions::with_width(config.bar_seconds);
    let mut tokens = Vec::with_capacity(events.len());
    for t in &events {
        let bars = ohlcv::bars_of_events(std::slice::from_ref(t), false, period, &options)?;
        tokens.push(TokenSection {
            token_address: t.token.clone(),
            symbol: symbols.get(&t.token).cloned(),
            usd_volume: volume(&t.events),
            events: t.events.len(),
            bars,
        });
    }

    // The sections below ask the lake's query, as the CLI does.
    let charted: Vec<String> = tokens.iter().map(|t| t.token_address.clone()).collect();
    let price_stats = if charted.is_empty() {
        DataFrame::empty()
    } else {
        lake.query()
            .source(config.source)
            .tokens(&charted)
            .price_stats(Some(last))?
    };

    let leaderboard = lake
        .query()
        .leaderboard_with(config.leaderboard_rows, &config.pnl)?;
    if leaderboard.height() == 0 {
        notes.push("PnL leaderboard: the lake holds no trades or swaps of any wallet".into());
    }

    let (screener, snapshot) = match latest {
        None => {
            notes.push(
                "screener: the lake holds no altchain token profiles (sync profiles first)".into(),
            );
            (None, None)
        }
        Some(at) => {
            let page = lake
                .query()
                .search_at(&config.screener, ProfileSnapshot::At(at))?;
            (Some(page), Some(at))
        }
    };

    let evm = evm::sections(lake, config)?;

    // The "Data" section: what the syncs fetched of the charted tokens over the period, and
    // the check's findings (two examples per kind) inside what was fetched.
    let mut charted_query = lake.query().source(config.source).tokens(&charted);
    if let (Some(from), Some(to)) = (period.from, period.to) {
        charted_query = charted_query.between(from, to);
    }
    let coverage = charted_query.coverage()?.warnings();
    let quality = lake.query().check(2, &|_| {})?;

    Ok(Report {
        title: config.title.clone(),
        generated_at: Utc::now(),
        lake: lake.root().to_owned(),
        datasets,
        period,
        bar_seconds: config.bar_seconds,
        evm_bar_seconds: config.evm_bar_seconds,
        tokens,
        price_stats,
        leaderboard,
        screener_request: config.screener.clone(),
        screener,
        snapshot,
        evm,
        coverage,
        quality,
        notes,
    })
}

/// Symbols of the altchain tokens in the profile snapshot fetched `at` (empty, with a note, when
/// they cannot be read).
fn symbols(lake: &Lake, at: DateTime<Utc>, notes: &mut Vec<String>) -> HashMap<String, String> {
    let read = || -> Result<HashMap<String, String>> {
        let df = local_search::snapshot_frame(lake, ProfileSnapshot::At(at))?
            .select([
                col(crate::lake::cols::token::TOKEN),
                col("metadata").struct_().field_by_name("symbol"),
            ])
            .collect()
            .map_err(|source| Error::Polars {
                context: "reading token symbols".into(),
                source,
            })?;
        let err = |source| Error::Polars {
            context: "reading token symbols".into(),
            source,
        };
        let tokens = df
            .column("token_address")
            .and_then(|c| c.str())
            .map_err(err)?;
        let symbols = df.column("symbol").and_then(|c| c.str()).map_err(err)?;
        Ok(tokens
            .iter()
            .zip(symbols.iter())
            .filter_map(|(t, s)| Some((t?.to_owned(), s?.to_owned())))
            .collect())
    };
    read().unwrap_or_else(|e| {
        notes.push(format!("token symbols unavailable: {e}"));
        HashMap::new()
    })
}

/// `abcd…wxyz` for an address.
fn short(address: &str) -> String {
    let chars: Vec<char> = address.chars().collect();
    if chars.len() <= 12 {
        address.to_owned()
    } else {
        let head: String = chars[..6].iter().collect();
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("{head}…{tail}")
    }
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

impl Report {
    /// File names of the charts [`write`](Self::write) draws, in page order: one candlestick
    /// chart per token, then one per token of each EVM chain, then the leaderboard's (when it
    /// has rows).
    pub fn chart_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| format!("candles_{}_{}.png", i + 1, file_safe(&t.token_address)))
            .collect();
        names.extend(self.evm_charts().map(|(_, _, name)| name));
        if self.leaderboard.height() > 0 {
            names.push("leaderboard.png".into());
        }
        names
    }

    /// Every EVM token's section with its chain's bar width and its chart's file name.
    fn evm_charts(&self) -> impl Iterator<Item = (&TokenSection, i64, String)> + '_ {
        self.evm.iter().flat_map(move |chain| {
            chain.tokens.iter().enumerate().map(move |(i, t)| {
                let name = format!(
                    "evm_{}_{}_{}.png",
                    chain.chain_id,
                    i + 1,
                    file_safe(&t.token_address)
                );
                (t, self.evm_bar_seconds, name)
            })
        })
    }

    /// Draws the charts into `dir/charts/` and writes `dir/index.html`, creating `dir`.
    /// Returns the page's path. Each file is written under a temporary name and renamed, so a
    /// reader never sees half a page or half an image.
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<PathBuf> {
        let dir = dir.as_ref();
        let chart_dir = dir.join("charts");
        fs::create_dir_all(&chart_dir).map_err(io("creating", &chart_dir))?;
        let names = self.chart_names();
        for (t, name) in self.tokens.iter().zip(&names) {
            let png = charts::candles(t, self.bar_seconds, name)?;
            write_atomic(&chart_dir.join(name), &png)?;
        }
        for (t, bar_seconds, name) in self.evm_charts() {
            let png = charts::candles(t, bar_seconds, &name)?;
            write_atomic(&chart_dir.join(&name), &png)?;
        }
        if self.leaderboard.height() > 0 {
            let png = charts::leaderboard(&self.leaderboard, "leaderboard.png")?;
            write_atomic(&chart_dir.join("leaderboard.png"), &png)?;
        }
        let page = html::page(self, &names, &lake_from(dir, &self.lake))?;
        let index = dir.join("index.html");
        write_atomic(&index, page.as_bytes())?;
        Ok(index)
    }

    /// A few lines for a terminal: the period, the most traded token, the leaderboard's best
    /// wallet and the screener's count.
    pub fn summary(&self) -> String {
        let mut lines = vec![format!(
            "period {} to {}: {} tokens charted",
            fmt_time(self.period.from),
            fmt_time(self.period.to),
            self.tokens.len()
        )];
        if let Some(t) = self.tokens.first() {
            lines.push(format!(
                "most traded: {} ({}), ${} over {} events, last close {}",
                t.label(),
                t.token_address,
                human(t.usd_volume),
                t.events,
                t.last_close().map(price).unwrap_or_else(|| "-".into())
            ));
        }
        if let Some((wallet, total)) = top_wallet(&self.leaderboard) {
            lines.push(format!(
                "best wallet: {wallet}, total PnL ${}",
                signed(total)
            ));
        }
        if let Some(page) = &self.screener {
            lines.push(format!("screener: {} tokens match", page.count));
        }
        for chain in &self.evm {
            let top = chain.tokens.first().map_or_else(String::new, |t| {
                format!(
                    ", most traded {} (${}), last close {}",
                    t.label(),
                    human(t.usd_volume),
                    t.last_close().map(price).unwrap_or_else(|| "-".into())
                )
            });
            lines.push(format!(
                "EVM chain {}: {} tokens charted from their price history{top}",
                chain.chain_id,
                chain.tokens.len()
            ));
        }
        if !self.coverage.is_empty() {
            lines.push(format!(
                "coverage: {} of the charted tokens' events not fetched (see `dexlake status`)",
                self.coverage.len()
            ));
        }
        lines.push(if self.quality.is_clean() {
            "data: the check found nothing".to_owned()
        } else {
            let found: Vec<String> = self
                .quality
                .findings
                .counts()
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(kind, n)| format!("{n} {kind}"))
                .collect();
            format!("data: {} (see `dexlake check`)", found.join(", "))
        });
        for n in &self.notes {
            lines.push(format!("note: {n}"));
        }
        lines.join("\n")
    }
}

/// How the page names the lake: its path relative to the page's folder (`../lake` for the
/// report's defaults), so a page never shows the folders above the two; a root that is not a
/// local folder (`s3://…`) as it is.
fn lake_from(dir: &Path, lake: &Path) -> String {
    let (Ok(dir), Ok(lake)) = (dir.canonicalize(), lake.canonicalize()) else {
        return lake.display().to_string();
    };
    let common = dir
        .components()
        .zip(lake.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut relative = PathBuf::new();
    for _ in dir.components().skip(common) {
        relative.push("..");
    }
    for part in lake.components().skip(common) {
        relative.push(part);
    }
    if relative.as_os_str().is_empty() {
        ".".into()
    } else {
        relative.display().to_string()
    }
}

/// The leaderboard's first wallet and its total PnL.
pub fn top_wallet(leaderboard: &DataFrame) -> Option<(String, f64)> {
    let wallet = leaderboard
        .column("wallet_address")
        .ok()?
        .str()
        .ok()?
        .get(0)?;
    let total = leaderboard.column("total_pnl").ok()?.f64().ok()?.get(0)?;
    Some((wallet.to_owned(), total))
}

fn file_safe(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(16)
        .collect()
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes).map_err(io("writing", &tmp))?;
    fs::rename(&tmp, path).map_err(io("renaming into", path))
}

fn fmt_time(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "-".into())
}

/// 1234567.8 → `1.23M`.
fn human(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e9 {
        (v / 1e9, "B")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    format!("{x:.2}{unit}")
}

fn signed(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", human(v))
    } else {
        format!("-{}", human(-v))
    }
}

/// A price with four significant digits at least.
fn price(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() {
        format!("{v}")
    } else if a >= 1000.0 {
        format!("{v:.2}")
    } else {
        let digits = (3 - a.log10().floor() as i32).clamp(2, 12) as usize;
        format!("{v:.digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(human(1_234_567.0), "1.23M");
        assert_eq!(human(999.0), "999.00");
        assert_eq!(signed(-2_500.0), "-2.50k");
        assert_eq!(signed(0.0), "+0.00");
        assert_eq!(price(0.000123456), "0.0001235");
        assert_eq!(price(12.3456), "12.35");
        assert_eq!(price(1234.5), "1234.50");
    }

    #[test]
    fn addresses_shorten_and_file_names_stay_safe() {
        assert_eq!(
            short("So11111111111111111111111111111111111111112"),
            "So1111…1112"
        );
        assert_eq!(short("abc"), "abc");
        assert_eq!(file_safe("../x/y:z"), "xyz");
    }

    #[test]
    fn the_default_screener_is_valid() {
        default_screener().validate().unwrap();
    }

    #[test]
    fn the_page_names_the_lake_relative_to_its_folder() {
        let root = tempfile::tempdir().unwrap();
        let (lake, report) = (root.path().join("lake"), root.path().join("report"));
        std::fs::create_dir_all(&lake).unwrap();
        std::fs::create_dir_all(report.join("daily")).unwrap();
        assert_eq!(lake_from(&report, &lake), "../lake");
        assert_eq!(lake_from(&report.join("daily"), &lake), "../../lake");
        assert_eq!(lake_from(root.path(), &lake), "lake");
        assert_eq!(lake_from(&lake, &lake), ".");
        let s3 = Path::new("s3://bucket/prefix");
        assert_eq!(lake_from(&report, s3), "s3://bucket/prefix");
    }
}
