//! What the lake covers: `dexlake status`, and the coverage every analytics answer reports.
//!
//! The sync records, per target it fetches, what it fetched completely (`sync/...` states in
//! the manifest, committed with the rows they describe). This module reads those states and
//! the manifest's file list, never a data file, and answers two questions:
//!
//! - [`status`]: per dataset, its files, bytes, rows and time span (from the manifest's
//!   per-file statistics), and per synced target (a token's, wallet's or pool's swaps or
//!   trades, a candles or price-history series, a snapshot) its rows, first and last record,
//!   the ranges fetched completely, when it was last synced, and whether its last run was
//!   interrupted;
//! - the coverage of a selection ([`of_events`], [`of_window`], [`of_wallets`],
//!   [`of_profiles`], [`of_series`]): for each token, wallet, series or snapshot an answer
//!   reads, the parts of the asked range no stream of it fetched completely
//!   ([`TargetCoverage::missing`]), and whether the lake holds only another stream's view of
//!   it ([`TargetCoverage::partial`]).
//!   `lake.query()` carries it with each answer ([`Answer`](crate::query::Answer)); the CLI warns on stderr and,
//!   with `--strict`, fails.
//!
//! # What "fetched completely" means
//!
//! The service's swaps and trades take no time filter: a stream is every record of one
//! filter (a token, a wallet, a pool for swaps, or a token and a wallet), newest first. A
//! completed run fetches everything of the stream from its first record to the run's start,
//! the service's time (`Date`) of its first answer, so the stream covers `[its first record,
//! start)`. An interrupted run covers from just after
//! the oldest record it handed off to its start; the part between an earlier complete run and
//! that record is missing until the next run resumes. Candles and price history record the
//! exact ranges they asked for and were answered (empty answers included). Snapshots are
//! complete or interrupted (some chunks or pages missing).
//!
//! A token's events are covered by its own streams only (`token=T`, no other filter): a
//! wallet's or a pool's stream holds only that wallet's or pool's part of them, which the
//! coverage names as a partial view. A wallet's PnL is covered by its own streams
//! (`wallet=W`), or for one token by that token's stream or the stream of that token and
//! that wallet (`token=T wallet=W`).
//!
//! # States of older versions
//!
//! A stream last completed by a version that recorded no times reports
//! [`TargetStatus::fetched_known`] `false` and no rows, first or last record: its coverage is
//! unknown (answers warn, `--strict` fails) until its next sync, which records them. Candles
//! and price history always recorded their ranges; only their `synced_at` is new.

mod status;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::Result;
use crate::analytics::ohlcv::{SeriesSource, Unfetched};
use crate::analytics::quality::HistoryTarget;
use crate::analytics::screener::ProfileSnapshot;
use crate::analytics::{EventSource, Selection};
use crate::lake::convert::CandleSeries;
use crate::lake::{Dataset, Lake};
use crate::sync::recorded::{self, Recorded};
use crate::time_range::TimeRange;

pub use status::{DatasetStatus, LakeStatus, TargetStatus, status};

/// The parts of `asked` outside every span of `covered` (sorted and disjoint).
fn subtract(asked: &TimeRange, covered: &[TimeRange]) -> Vec<TimeRange> {
    let (mut at, end) = asked.micros();
    let mut out = Vec::new();
    for c in covered {
        let (from, to) = c.micros();
        if to <= at {
            continue;
        }
        if from >= end {
            break;
        }
        if from > at {
            out.push(TimeRange::of_micros(at, from));
        }
        at = at.max(to);
        if at >= end {
            break;
        }
    }
    if at < end {
        out.push(TimeRange::of_micros(at, end));
    }
    out
}

/// The coverage of one target an answer reads: a token's events, a wallet's trades, a profile
/// snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetCoverage {
    /// What: `token=T`, `pool=P`, `wallet=W`, `profiles`.
    pub target: String,
    /// The range the answer reads. An open end stops at the end of what the target's streams
    /// fetched: nothing after the last sync is claimed missing.
    pub asked: TimeRange,
    /// Parts of `asked` that no stream of the target fetched completely, in order. Empty when
    /// the target is covered, or when its coverage is unknown.
    pub missing: Vec<TimeRange>,
    /// Set when the lake holds only another stream's part of the target, naming it (such as
    /// the swaps of wallet W for a token never synced by token).
    pub partial: Option<String>,
    /// Whether the lake recorded the target's coverage: `false` when no sync of it is
    /// recorded, or a stream of it was completed by an older version that kept no times.
    pub recorded: bool,
}

impl TargetCoverage {
    /// Whether the target is known to be fetched completely over `asked`.
    pub fn is_complete(&self) -> bool {
        self.recorded && self.missing.is_empty() && self.partial.is_none()
    }
}

/// The coverage of what one answer read: its dataset and each target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coverage {
    /// The dataset read.
    pub dataset: Dataset,
    /// Each target read, in order.
    pub targets: Vec<TargetCoverage>,
    /// Caveats that concern no single target (such as the wallets a PnL of every wallet could
    /// not check).
    pub notes: Vec<String>,
}

impl Coverage {
    /// Whether every target is known to be fetched completely and no caveat applies.
    pub fn is_complete(&self) -> bool {
        self.notes.is_empty() && self.targets.iter().all(TargetCoverage::is_complete)
    }

    /// One line per incomplete target or caveat, naming the missing ranges, for a warning.
    pub fn warnings(&self) -> Vec<String> {
        let d = self.dataset;
        let mut out = Vec::new();
        for t in &self.targets {
            let what = format!("{d} of {}", t.target.replace('=', " "));
            if let Some(p) = &t.partial {
                out.push(format!("{what}: {p}"));
            } else if !t.recorded {
                out.push(format!(
                    "{what}: the lake records no sync of it with its times, so its coverage \
                     is unknown (sync it with `{}`)",
                    sync_command(d, &t.target)
                ));
            }
            if t.recorded && !t.missing.is_empty() {
                let spans: Vec<String> = t.missing.iter().map(TimeRange::to_string).collect();
                out.push(format!(
                    "{what}: never fetched in {} (of {} asked)",
                    spans.join(", "),
                    t.asked
                ));
            }
        }
        out.extend(self.notes.iter().cloned());
        out
    }

    /// The ranges never fetched of each token whose own stream is recorded (and of each
    /// pool's candles, which the series' bars key by their pool), for
    /// [`BarOptions::unfetched`](crate::analytics::BarOptions::unfetched).
    pub fn unfetched(&self) -> Unfetched {
        let mut out = Unfetched::new();
        for t in &self.targets {
            // A series' target names its interval (and chain) after its token or pool.
            let first = match self.dataset {
                Dataset::Candles | Dataset::PriceHistory => {
                    t.target.split(' ').next().unwrap_or_default()
                }
                _ => t.target.as_str(),
            };
            let pool = || match self.dataset {
                Dataset::Candles => first.strip_prefix("pool="),
                _ => None,
            };
            let Some(token) = first.strip_prefix("token=").or_else(pool) else {
                continue;
            };
            if !t.recorded || t.partial.is_some() {
                continue;
            }
            for m in &t.missing {
                let (from, to) = m.micros();
                out.insert(token, from, to);
            }
        }
        out
    }
}

/// The `dexlake sync` command that fetches a target of a dataset (`token=T`, `pool=P`,
/// `wallet=W` or `profiles`), for the warnings.
fn sync_command(dataset: Dataset, target: &str) -> String {
    if let Some(command) = series_sync_command(dataset, target) {
        return command;
    }
    let command = match dataset {
        Dataset::Swaps => "swaps",
        Dataset::Trades => "trades",
        Dataset::Candles => "candles",
        Dataset::PriceHistory => "price-history",
        Dataset::Prices => "prices",
        Dataset::PriceStats => "price-stats",
        Dataset::TokenProfiles => "profiles",
        Dataset::Portfolios => "portfolios",
        // Bars are written by follow, which syncs swaps.
        Dataset::Bars => return format!("dexlake follow --{}", target.replace('=', " ")),
    };
    let flags = match target.split_once('=') {
        Some((key, value)) => format!(" --{key} {value}"),
        None if dataset == Dataset::TokenProfiles => " --altchain --request FILE.json".to_owned(),
        None => String::new(),
    };
    format!("dexlake sync {command}{flags}")
}

/// The `dexlake sync` command that fetches a series' target (`token=T interval=60`,
/// `pool=P chain_id=1 interval=60`); `None` for the other datasets.
fn series_sync_command(dataset: Dataset, target: &str) -> Option<String> {
    let pairs: Vec<(&str, &str)> = target
        .split(' ')
        .filter_map(|p| p.split_once('='))
        .collect();
    let get = |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let (kind, address) = pairs.first().copied()?;
    let interval = get("interval").unwrap_or("SECONDS");
    match dataset {
        Dataset::Candles => Some(format!(
            "dexlake sync candles --{kind} {address} --interval {interval} --from TIME"
        )),
        Dataset::PriceHistory => Some(format!(
            "dexlake sync price-history --chain-id {} --{kind}s {address} --interval {interval} \
             --from TIME",
            get("chain_id").unwrap_or("N")
        )),
        _ => None,
    }
}

/// What the data check takes as fetched ([`CheckOptions::fetched`],
/// [`CheckOptions::candles_fetched`] and [`CheckOptions::history_fetched`]): per token, the
/// ranges its own swaps stream fetched completely; per candle series and per price-history
/// target, the ranges its syncs covered. Targets whose extent is not recorded are left out
/// (the check then takes their own first to last record).
///
/// [`CheckOptions::fetched`]: crate::analytics::quality::CheckOptions::fetched
/// [`CheckOptions::candles_fetched`]: crate::analytics::quality::CheckOptions::candles_fetched
/// [`CheckOptions::history_fetched`]: crate::analytics::quality::CheckOptions::history_fetched
#[doc(hidden)]
pub fn check_ranges(lake: &Lake) -> Result<CheckRanges> {
    let ranges = |r: &Recorded| -> Vec<TimeRange> { r.fetched.clone() };
    let mut out = CheckRanges::default();
    for r in recorded_in(lake, Dataset::Swaps)? {
        if let [(k, token)] = r.target.as_slice()
            && k == "token"
            && r.fetched_known
        {
            out.swaps.insert(token.clone(), ranges(&r));
        }
    }
    for r in recorded_in(lake, Dataset::Candles)? {
        let Some(interval) = r.key.value("interval").and_then(|i| i.parse::<i64>().ok()) else {
            continue;
        };
        if r.fetched_known {
            let series = CandleSeries {
                token: r.key.value("token"),
                pool: r.key.value("pool"),
                interval,
            };
            out.candles.entry(series).or_default().extend(ranges(&r));
        }
    }
    for r in recorded_in(lake, Dataset::PriceHistory)? {
        let number = |name: &str| r.key.value(name).and_then(|v| v.parse::<i64>().ok());
        let chain_id = r
            .key
            .value("chain")
            .and_then(|c| c.strip_prefix("evm-").and_then(|n| n.parse::<i64>().ok()));
        let (Some(chain_id), Some(interval)) = (chain_id, number("interval")) else {
            continue;
        };
        let (token, pool) = (r.key.value("token"), r.key.value("pool"));
        if r.fetched_known && (token.is_some() || pool.is_some()) {
            let target = HistoryTarget {
                chain_id,
                token,
                pool,
                interval,
            };
            out.price_history
                .entry(target)
                .or_default()
                .extend(ranges(&r));
        }
    }
    Ok(out)
}

/// The fetched ranges [`check_ranges`] gives the data check.
#[doc(hidden)]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckRanges {
    /// Per token, the ranges of its swaps fetched completely.
    pub swaps: BTreeMap<String, Vec<TimeRange>>,
    /// Per candle series, the ranges its candles cover.
    pub candles: BTreeMap<CandleSeries, Vec<TimeRange>>,
    /// Per price-history target (a chain's token or pool at an interval), the ranges its
    /// syncs covered.
    pub price_history: BTreeMap<HistoryTarget, Vec<TimeRange>>,
}

fn recorded_in(lake: &Lake, dataset: Dataset) -> Result<Vec<Recorded>> {
    recorded::in_dataset(lake, dataset)
}

/// `name=value name=value` of a target's pairs.
pub(crate) fn target_text(target: &[(String, String)]) -> String {
    target
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a record's target is exactly `name=value`.
fn is_only(r: &Recorded, name: &str, value: &str) -> bool {
    matches!(r.target.as_slice(), [(k, v)] if k == name && v == value)
}

fn has(r: &Recorded, name: &str, value: &str) -> bool {
    r.target.iter().any(|(k, v)| k == name && v == value)
}

/// The coverage of one target from its own streams (`own`) over `asked`; an open end of
/// `asked` stops where the streams' fetched ranges end.
fn from_streams(target: String, own: &[&Recorded], asked: TimeRange) -> TargetCoverage {
    let covered: Vec<TimeRange> = own.iter().flat_map(|r| r.fetched.iter().copied()).collect();
    let covered = TimeRange::merged(covered);
    let recorded = !own.is_empty() && own.iter().all(|r| r.fetched_known);
    let asked = TimeRange {
        from: asked.from,
        to: asked.to.or_else(|| covered.last().and_then(|s| s.to)),
    };
    let missing = if recorded {
        subtract(&asked, &covered)
    } else {
        Vec::new()
    };
    TargetCoverage {
        target,
        asked,
        missing,
        partial: None,
        recorded,
    }
}

/// Names the streams that hold part of a target the lake has no own stream of.
fn partial_view(others: &[&Recorded], what: &str) -> Option<String> {
    if others.is_empty() {
        return None;
    }
    let names: BTreeSet<String> = others.iter().map(|r| target_text(&r.target)).collect();
    Some(format!(
        "{what}; the lake holds only what the streams {} fetched, a partial view",
        names.into_iter().collect::<Vec<_>>().join(", ")
    ))
}

/// The coverage of one token's events in `dataset` over `asked`.
fn token_coverage(records: &[Recorded], token: &str, asked: TimeRange) -> TargetCoverage {
    let own: Vec<&Recorded> = records
        .iter()
        .filter(|r| is_only(r, "token", token))
        .collect();
    let target = format!("token={token}");
    if !own.is_empty() {
        return from_streams(target, &own, asked);
    }
    // Streams that may hold some of the token's events: its own with another filter, and
    // every wallet's or pool's stream.
    let others: Vec<&Recorded> = records
        .iter()
        .filter(|r| has(r, "token", token) || !r.target.iter().any(|(k, _)| k == "token"))
        .collect();
    TargetCoverage {
        target,
        asked,
        missing: vec![asked],
        partial: partial_view(&others, "never synced by token"),
        recorded: false,
    }
}

/// The coverage of the events [`crate::analytics::bars`] (and the other event answers) read:
/// each selected token's (or the pool's) events of `source` over `range`. With every token
/// selected, each token with a stream of its own is checked, and a note says the others are
/// not.
#[doc(hidden)]
pub fn of_events(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
) -> Result<Coverage> {
    let dataset = source.dataset();
    let records = recorded_in(lake, dataset)?;
    let asked = TimeRange {
        from: range.from,
        to: range.to,
    };
    let mut notes = Vec::new();
    let targets = match selection {
        Selection::Token(t) => vec![token_coverage(&records, t, asked)],
        Selection::Tokens(ts) => ts
            .iter()
            .map(|t| token_coverage(&records, t, asked))
            .collect(),
        Selection::Pool(p) => {
            let own: Vec<&Recorded> = records.iter().filter(|r| is_only(r, "pool", p)).collect();
            if own.is_empty() {
                vec![TargetCoverage {
                    target: format!("pool={p}"),
                    asked,
                    missing: vec![asked],
                    partial: Some(
                        "never synced by pool; the lake holds only what other streams fetched \
                         of it"
                            .into(),
                    ),
                    recorded: false,
                }]
            } else {
                vec![from_streams(format!("pool={p}"), &own, asked)]
            }
        }
        Selection::AllTokens => {
            let tokens: BTreeSet<&str> = records
                .iter()
                .filter_map(|r| match r.target.as_slice() {
                    [(k, v)] if k == "token" => Some(v.as_str()),
                    _ => None,
                })
                .collect();
            if records.is_empty() {
                notes.push(format!(
                    "{dataset} of every token: the lake records no sync of {dataset}, so its \
                     coverage is unknown"
                ));
            } else if records
                .iter()
                .any(|r| !r.target.iter().all(|(k, _)| k == "token"))
            {
                notes.push(format!(
                    "{dataset} of every token: tokens without a stream of their own (synced \
                     only by wallet or pool) are partial views, and are not checked"
                ));
            }
            tokens
                .into_iter()
                .map(|t| token_coverage(&records, t, asked))
                .collect()
        }
    };
    Ok(Coverage {
        dataset,
        targets,
        notes,
    })
}

/// The coverage of the stored series `series` that [`crate::analytics::series_bars`] reads:
/// for each selected token or pool (`selection`; every target the series' syncs recorded
/// when every token is selected), the parts of `range` its syncs at `interval` (at any
/// interval when `None`) never fetched. An open side of `range` stops where the target's
/// fetched ranges do: a series is fetched from the start its sync asked for, so nothing
/// before the first sync or after the last one is claimed missing, only the holes between
/// them and what a closed range reaches beyond them. A target with no recorded sync has an
/// unknown coverage (answers warn, `--strict` fails).
///
/// The candles of a token are covered by the syncs of that token (with or without a pool),
/// a pool's by the syncs of that pool; a price history's by the syncs of its chain's token
/// or pool. A target's text names its interval (and chain): `token=T interval=60`,
/// `token=A chain_id=1 interval=60`.
#[doc(hidden)]
pub fn of_series(
    lake: &Lake,
    series: SeriesSource,
    selection: &Selection,
    interval: Option<i64>,
    range: TimeRange,
) -> Result<Coverage> {
    let dataset = series.dataset();
    let chain = match series {
        SeriesSource::Candles => None,
        SeriesSource::PriceHistory { chain_id } => Some(format!("evm-{chain_id}")),
    };
    let pair = |r: &Recorded, name: &str| -> Option<String> {
        r.target
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let records: Vec<Recorded> = recorded_in(lake, dataset)?
        .into_iter()
        .filter(|r| {
            (pair(r, "token").is_some() || pair(r, "pool").is_some())
                && chain
                    .as_ref()
                    .is_none_or(|c| pair(r, "chain").as_ref() == Some(c))
                && interval.is_none_or(|i| pair(r, "interval") == Some(i.to_string()))
        })
        .collect();
    let mut suffix = String::new();
    if let SeriesSource::PriceHistory { chain_id } = series {
        suffix.push_str(&format!(" chain_id={chain_id}"));
    }
    if let Some(i) = interval {
        suffix.push_str(&format!(" interval={i}"));
    }
    let target = |kind: &str, address: &str| -> TargetCoverage {
        let own: Vec<&Recorded> = records
            .iter()
            .filter(|r| pair(r, kind).as_deref() == Some(address))
            .collect();
        let name = format!("{kind}={address}{suffix}");
        if own.is_empty() {
            return TargetCoverage {
                target: name,
                asked: range,
                missing: vec![range],
                partial: None,
                recorded: false,
            };
        }
        let covered = TimeRange::merged(own.iter().flat_map(|r| r.fetched.iter().copied()));
        let recorded = own.iter().all(|r| r.fetched_known);
        let asked = TimeRange {
            from: range.from.or_else(|| covered.first().and_then(|s| s.from)),
            to: range.to.or_else(|| covered.last().and_then(|s| s.to)),
        };
        let missing = if recorded {
            subtract(&asked, &covered)
        } else {
            Vec::new()
        };
        TargetCoverage {
            target: name,
            asked,
            missing,
            partial: None,
            recorded,
        }
    };
    let mut notes = Vec::new();
    let targets = match selection {
        Selection::Token(t) => vec![target("token", t)],
        Selection::Tokens(ts) => ts.iter().map(|t| target("token", t)).collect(),
        Selection::Pool(p) => vec![target("pool", p)],
        Selection::AllTokens => {
            if records.is_empty() {
                notes.push(format!(
                    "{dataset}{suffix}: the lake records no sync of the series, so its \
                     coverage is unknown",
                    suffix = suffix.replace('=', " ")
                ));
            }
            // A candle series of a token and a pool is the token's.
            let named: BTreeSet<(&str, String)> = records
                .iter()
                .filter_map(|r| match (pair(r, "token"), pair(r, "pool")) {
                    (Some(t), _) => Some(("token", t)),
                    (None, Some(p)) => Some(("pool", p)),
                    (None, None) => None,
                })
                .collect();
            named.iter().map(|(k, a)| target(k, a)).collect()
        }
    };
    Ok(Coverage {
        dataset,
        targets,
        notes,
    })
}

/// The time an answer "as of now" is taken at when `now` is not given: the newest record of
/// the dataset (from the manifest's file statistics), as the analytics take it.
fn resolve_now(
    lake: &Lake,
    dataset: Dataset,
    now: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>> {
    match now {
        Some(now) => Ok(Some(now)),
        None => Ok(lake
            .snapshot()?
            .files_of(dataset)
            .map(|(_, e)| e.max_time)
            .max()),
    }
}

/// The coverage of windows that end at `now` and reach back `seconds` (price stats: 30 days;
/// token metrics: their widest window), for each of `tokens`' events of `source`. Without
/// `now`, the dataset's newest record, as the analytics take it.
#[doc(hidden)]
pub fn of_window(
    lake: &Lake,
    source: EventSource,
    tokens: &[String],
    now: Option<DateTime<Utc>>,
    seconds: i64,
) -> Result<Coverage> {
    let dataset = source.dataset();
    let records = recorded_in(lake, dataset)?;
    let now = resolve_now(lake, dataset, now)?;
    let asked = match now {
        // Events at `now` count: the window is `(now - seconds, now]`.
        Some(now) => TimeRange {
            from: now.checked_sub_signed(Duration::seconds(seconds)),
            to: Some(now + Duration::microseconds(1)),
        },
        None => TimeRange {
            from: None,
            to: None,
        },
    };
    let targets = tokens
        .iter()
        .map(|t| token_coverage(&records, t, asked))
        .collect();
    Ok(Coverage {
        dataset,
        targets,
        notes: Vec::new(),
    })
}

/// Whether a record's target is exactly the token `token` and the wallet `wallet`.
fn is_token_and_wallet(r: &Recorded, token: &str, wallet: &str) -> bool {
    r.target.len() == 2 && has(r, "token", token) && has(r, "wallet", wallet)
}

/// The wallet of a stream of one token and one wallet (`token=T wallet=W`).
fn token_and_wallet(r: &Recorded) -> Option<(&str, &str)> {
    let value = |name: &str| {
        r.target
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    match (r.target.len(), value("token"), value("wallet")) {
        (2, Some(t), Some(w)) => Some((t, w)),
        _ => None,
    }
}

/// The coverage of a PnL: each wallet's whole history of trades (and swaps, for a wallet
/// with no trades), or with `token` only that token's. A wallet's trades are complete when a
/// stream of the wallet fetched them (`trades --wallet W`, or `swaps --wallet W`), or for one
/// token when that token's stream did, or the stream of that token and that wallet; a wallet
/// synced by none of them is partial, naming the streams whose trades of it the lake holds.
/// `wallets: None` (every wallet) checks the recorded streams, names as partial each wallet
/// the lake holds only through streams of one of its tokens (`token=T wallet=W`) that the
/// answer reads beyond that token, and notes that a wallet without a stream of its own is
/// covered only in the tokens synced by token.
#[doc(hidden)]
pub fn of_wallets(
    lake: &Lake,
    wallets: Option<&[String]>,
    token: Option<&str>,
) -> Result<Coverage> {
    let trades = recorded_in(lake, Dataset::Trades)?;
    let swaps = recorded_in(lake, Dataset::Swaps)?;
    let open = TimeRange {
        from: None,
        to: None,
    };
    let by_token: Vec<String> = trades
        .iter()
        .filter_map(|r| match r.target.as_slice() {
            [(k, v)] if k == "token" => Some(v.clone()),
            _ => None,
        })
        .collect();
    let own_streams = |w: &str| -> Vec<&Recorded> {
        trades
            .iter()
            .chain(&swaps)
            .filter(|r| is_only(r, "wallet", w))
            .collect()
    };
    let Some(wallets) = wallets else {
        let mut targets: Vec<TargetCoverage> = trades
            .iter()
            .filter(|r| r.target.len() == 1)
            .map(|r| from_streams(target_text(&r.target), &[r], open))
            .filter(|t| !t.is_complete())
            .collect();
        targets.retain(|t| !t.missing.is_empty() || !t.recorded);
        // Wallets the lake holds through a stream of one of their tokens only: their PnL is
        // that token's part, unless the answer reads that token alone.
        let mut of_one_token: BTreeMap<&str, Vec<&Recorded>> = BTreeMap::new();
        for r in trades.iter().chain(&swaps) {
            if let Some((_, w)) = token_and_wallet(r) {
                of_one_token.entry(w).or_default().push(r);
            }
        }
        for (w, streams) in of_one_token {
            if !own_streams(w).is_empty() {
                continue;
            }
            let target = format!("wallet={w}");
            let exact: Vec<&Recorded> = token
                .map(|t| {
                    streams
                        .iter()
                        .copied()
                        .filter(|r| is_token_and_wallet(r, t, w))
                        .collect()
                })
                .unwrap_or_default();
            if !exact.is_empty() {
                let t = from_streams(target, &exact, open);
                if !t.is_complete() {
                    targets.push(t);
                }
                continue;
            }
            let names: BTreeSet<String> = streams.iter().map(|r| target_text(&r.target)).collect();
            targets.push(TargetCoverage {
                target,
                asked: open,
                missing: Vec::new(),
                partial: Some(format!(
                    "never synced by wallet; the lake holds its trades only from the streams {} \
                     fetched, so its PnL is partial",
                    names.into_iter().collect::<Vec<_>>().join(", ")
                )),
                recorded: false,
            });
        }
        let mut notes = Vec::new();
        if !by_token.is_empty() {
            notes.push(format!(
                "PnL of every wallet: a wallet never synced by wallet is counted only in the \
                 tokens synced by token ({})",
                by_token.join(", ")
            ));
        }
        return Ok(Coverage {
            dataset: Dataset::Trades,
            targets,
            notes,
        });
    };
    let mut targets = Vec::new();
    for w in wallets {
        let own = own_streams(w);
        let target = format!("wallet={w}");
        if !own.is_empty() {
            targets.push(from_streams(target, &own, open));
            continue;
        }
        if let Some(t) = token {
            // The token's own stream holds every wallet's trades of it; the stream of the
            // token and the wallet holds exactly the wallet's.
            let of_token: Vec<&Recorded> = trades
                .iter()
                .filter(|r| is_only(r, "token", t))
                .chain(
                    trades
                        .iter()
                        .chain(&swaps)
                        .filter(|r| is_token_and_wallet(r, t, w)),
                )
                .collect();
            if !of_token.is_empty() {
                targets.push(from_streams(target, &of_token, open));
                continue;
            }
        }
        let mut in_tokens: Vec<String> = by_token.clone();
        in_tokens.extend(
            trades
                .iter()
                .chain(&swaps)
                .filter(|r| r.target.len() > 1 && has(r, "wallet", w))
                .map(|r| target_text(&r.target)),
        );
        let partial = if in_tokens.is_empty() {
            None
        } else {
            Some(format!(
                "never synced by wallet; the lake holds its trades only in the tokens synced \
                 by token ({}), so its PnL is partial",
                in_tokens.join(", ")
            ))
        };
        targets.push(TargetCoverage {
            target,
            asked: open,
            missing: Vec::new(),
            partial,
            recorded: false,
        });
    }
    Ok(Coverage {
        dataset: Dataset::Trades,
        targets,
        notes: Vec::new(),
    })
}

/// The coverage of a local search: whether the profile snapshot it reads is complete. A
/// snapshot whose sync was interrupted holds only some of the request's pages.
#[doc(hidden)]
pub fn of_profiles(lake: &Lake, snapshot: &ProfileSnapshot) -> Result<Coverage> {
    let records = recorded_in(lake, Dataset::TokenProfiles)?;
    let partial_at: Vec<DateTime<Utc>> = records
        .iter()
        .filter_map(|r| r.partial_snapshot_at)
        .collect();
    let newest = records
        .iter()
        .flat_map(|r| [r.snapshot_at, r.partial_snapshot_at])
        .flatten()
        .max();
    let used = match snapshot {
        ProfileSnapshot::Latest => newest,
        ProfileSnapshot::At(t) => Some(*t),
    };
    let partial = used.filter(|t| partial_at.contains(t)).map(|t| {
        format!(
            "the snapshot fetched at {} was interrupted: it holds only part of its \
                 request's profiles (the next sync completes it)",
            t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
        )
    });
    let at = used.map(|t| TimeRange {
        from: Some(t),
        to: Some(t + Duration::microseconds(1)),
    });
    Ok(Coverage {
        dataset: Dataset::TokenProfiles,
        targets: vec![TargetCoverage {
            target: "profiles".into(),
            asked: at.unwrap_or(TimeRange {
                from: None,
                to: None,
            }),
            missing: Vec::new(),
            partial,
            recorded: !records.is_empty(),
        }],
        notes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(from: Option<i64>, to: Option<i64>) -> TimeRange {
        let at = |x: i64| DateTime::from_timestamp(x, 0).unwrap();
        TimeRange {
            from: from.map(at),
            to: to.map(at),
        }
    }

    #[test]
    fn warnings_suggest_sync_commands_that_exist() {
        let unrecorded = |dataset: Dataset, target: &str| Coverage {
            dataset,
            targets: vec![TargetCoverage {
                target: target.into(),
                asked: s(None, None),
                missing: Vec::new(),
                partial: None,
                recorded: false,
            }],
            notes: Vec::new(),
        };
        let hint = |dataset: Dataset, target: &str| {
            let w = unrecorded(dataset, target).warnings();
            assert_eq!(w.len(), 1, "{w:?}");
            let start = w[0].find('`').expect("a command") + 1;
            let end = w[0][start..].find('`').expect("its end") + start;
            w[0][start..end].to_owned()
        };
        assert_eq!(
            hint(Dataset::TokenProfiles, "profiles"),
            "dexlake sync profiles --altchain --request FILE.json"
        );
        assert_eq!(
            hint(Dataset::Swaps, "token=T1"),
            "dexlake sync swaps --token T1"
        );
        assert_eq!(
            hint(Dataset::Trades, "wallet=W1"),
            "dexlake sync trades --wallet W1"
        );
        assert_eq!(
            hint(Dataset::Swaps, "pool=P"),
            "dexlake sync swaps --pool P"
        );
        assert_eq!(
            hint(Dataset::Candles, "token=T1 interval=60"),
            "dexlake sync candles --token T1 --interval 60 --from TIME"
        );
        assert_eq!(
            hint(Dataset::PriceHistory, "pool=P chain_id=1 interval=3600"),
            "dexlake sync price-history --chain-id 1 --pools P --interval 3600 --from TIME"
        );
    }

    #[test]
    fn subtracting_covered_spans_leaves_the_holes() {
        let covered = [s(None, Some(10)), s(Some(20), Some(30))];
        assert_eq!(
            subtract(&s(Some(5), Some(40)), &covered),
            vec![s(Some(10), Some(20)), s(Some(30), Some(40))]
        );
        assert_eq!(subtract(&s(None, Some(8)), &covered), vec![]);
        assert_eq!(
            subtract(&s(None, None), &[s(Some(1), Some(2))]),
            vec![s(None, Some(1)), s(Some(2), None)]
        );
    }
}
