//! `Lake`: one open lake and the analytics on it, each one call of the `dexlake` crate made
//! with the GIL released, its frame returned as a [`FrameStream`] and what the lake's syncs
//! never fetched of it as notes (or, with `strict`, a `CoverageError`).
//!
//! Instants arrive as Unix microseconds (the Python layer converts `datetime`s, strings and
//! seconds); every other argument is checked by the crate, which names it when it refuses it.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use dexlake::analytics::metrics::RatioConfig;
use dexlake::analytics::pnl::{
    self, CostMethod, EquityConfig, Mark, OversellPolicy, PnlConfig, PnlQuery, PnlReport,
};
use dexlake::analytics::screener::{self, ProfileSnapshot};
use dexlake::analytics::token_metrics::{self, Window, parse_span};
use dexlake::analytics::{
    BarOptions, Edge, EventRule, EventSource, Fill, PriceStatsOptions, Selection, TimeRange, bars,
    event_bars, price_stats,
};
use dexlake::api::profile_query::SearchRequest;
use dexlake::coverage::{self, Coverage};
use dexlake::lake::{Dataset, Lake};
use polars::prelude::*;
use pyo3::prelude::*;

use crate::errors::{IntoPy, raise};
use crate::frames::FrameStream;

/// What a scan reads: file locations, hive columns and their types, the columns in order, and
/// an empty frame of them when no file is committed.
type ScanPlan = (
    Vec<String>,
    Vec<(String, &'static str)>,
    Vec<String>,
    Option<FrameStream>,
);

/// A frame and the notes on what its lake does not cover.
type Answer = (FrameStream, Vec<String>);

/// An open lake (`dexlake.Lake` wraps it).
#[pyclass(module = "dexlake._dexlake", frozen)]
pub struct NativeLake {
    pub lake: Arc<Lake>,
    root: String,
}

fn invalid(argument: &str, reason: impl Into<String>) -> dexlake::Error {
    dexlake::Error::InvalidArgument {
        argument: argument.into(),
        reason: reason.into(),
    }
}

fn instant(micros: Option<i64>, argument: &str) -> dexlake::Result<Option<DateTime<Utc>>> {
    micros
        .map(|m| {
            DateTime::from_timestamp_micros(m)
                .ok_or_else(|| invalid(argument, format!("{m} µs is outside the dates supported")))
        })
        .transpose()
}

fn source_of(source: &str) -> dexlake::Result<EventSource> {
    match source {
        "swaps" => Ok(EventSource::Swaps),
        "trades" => Ok(EventSource::Trades),
        other => Err(invalid(
            "source",
            format!("{other:?}: expected \"swaps\" or \"trades\""),
        )),
    }
}

fn edge_of(edge: &str, argument: &str) -> dexlake::Result<Edge> {
    match edge {
        "left" => Ok(Edge::Left),
        "right" => Ok(Edge::Right),
        other => Err(invalid(
            argument,
            format!("{other:?}: expected \"left\" or \"right\""),
        )),
    }
}

fn fill_of(fill: &str) -> dexlake::Result<Fill> {
    match fill {
        "skip" => Ok(Fill::Skip),
        "null" => Ok(Fill::Null),
        "ffill" => Ok(Fill::ForwardFill),
        other => Err(invalid(
            "fill",
            format!("{other:?}: expected \"skip\", \"null\" or \"ffill\""),
        )),
    }
}

/// The notes on `coverage`, or with `strict` the refusal naming them.
fn covered(py: Python<'_>, coverage: &Coverage, strict: bool) -> PyResult<Vec<String>> {
    let notes = coverage.warnings();
    if strict && !notes.is_empty() {
        return Err(raise(
            py,
            "CoverageError",
            format!(
                "strict: the lake does not completely cover what was asked: {}",
                notes.join("; ")
            ),
            None,
        ));
    }
    Ok(notes)
}

/// The PnL configuration of the CLI's `pnl` flags.
fn pnl_config(
    method: &str,
    mark: &str,
    oversell: &str,
    dust: f64,
    lots: bool,
) -> dexlake::Result<PnlConfig> {
    let config = PnlConfig {
        method: method.parse::<CostMethod>()?,
        oversell: oversell.parse::<OversellPolicy>()?,
        mark: mark.parse::<Mark>()?,
        dust,
        lots,
    };
    config.validate()?;
    Ok(config)
}

/// The table of a PnL report the caller asked for.
fn pnl_table(report: PnlReport, table: &str) -> DataFrame {
    match table {
        "lots" => report.lots.unwrap_or_default(),
        "positions" => report.positions,
        _ => report.ledgers,
    }
}

impl NativeLake {
    /// Runs `compute` on the lake with the GIL released; its frame is the answer and its
    /// coverage the notes beside it (or, with `strict`, the refusal naming them).
    fn answer(
        &self,
        py: Python<'_>,
        strict: bool,
        compute: impl FnOnce(&Lake) -> dexlake::Result<(DataFrame, Coverage)> + Send,
    ) -> PyResult<Answer> {
        let (frame, coverage) = py.detach(|| compute(&self.lake)).py(py)?;
        let notes = covered(py, &coverage, strict)?;
        Ok((FrameStream::new(frame), notes))
    }
}

#[pymethods]
impl NativeLake {
    /// Opens the lake at `root` (a folder or `s3://bucket/prefix`): an existing one, or with
    /// `create` a new one.
    #[new]
    #[pyo3(signature = (root, create=false))]
    fn new(py: Python<'_>, root: String, create: bool) -> PyResult<Self> {
        let path = std::path::PathBuf::from(&root);
        let lake = py
            .detach(|| {
                if create {
                    Lake::open(path)
                } else if !Lake::exists(&path)? {
                    Err(dexlake::Error::Lake {
                        path,
                        message: "not a dexlake lake; sync into it (dexlake.sync) or open it \
                                  with create=True to start one"
                            .into(),
                    })
                } else {
                    Lake::open_existing(path)
                }
            })
            .py(py)?;
        Ok(NativeLake {
            lake: Arc::new(lake),
            root,
        })
    }

    /// The root the lake was opened at.
    #[getter]
    fn root(&self) -> &str {
        &self.root
    }

    /// The dataset names.
    #[staticmethod]
    fn datasets() -> Vec<&'static str> {
        Dataset::ALL.iter().map(|d| d.name()).collect()
    }

    /// What a scan of `dataset` reads: the committed files' locations (each checked against
    /// its manifest entry), the hive columns with their types, and the columns in order; with
    /// an empty frame of those columns when nothing is committed.
    fn scan_plan(&self, py: Python<'_>, dataset: &str) -> PyResult<ScanPlan> {
        let dataset: Dataset = dataset
            .parse()
            .map_err(|_| {
                invalid(
                    "dataset",
                    format!(
                        "{dataset:?}: expected one of {}",
                        NativeLake::datasets().join(", ")
                    ),
                )
            })
            .py(py)?;
        let paths = py
            .detach(|| self.lake.scan_locations(dataset))
            .py(py)?
            .into_iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect::<Vec<_>>();
        // The hive columns as `Lake::scan` types them, by their names in Python's polars.
        let hive = dexlake::lake::hive_schema(dataset)
            .iter()
            .map(|(name, dtype)| {
                let name_in_python = match dtype {
                    DataType::Int64 => "Int64",
                    DataType::Date => "Date",
                    _ => "String",
                };
                (name.to_string(), name_in_python)
            })
            .collect();
        let columns = dexlake::lake::scan_columns(dataset);
        let empty = if paths.is_empty() {
            let frame = self
                .lake
                .scan(dataset)
                .and_then(|lf| {
                    lf.collect()
                        .map_err(dexlake::Error::polars(format!("scanning {dataset}")))
                })
                .py(py)?;
            Some(FrameStream::new(frame))
        } else {
            None
        };
        Ok((paths, hive, columns, empty))
    }

    /// Time bars (`interval`) or tick, volume and dollar bars, as `dexlake ohlcv` makes them.
    #[pyo3(signature = (
        token, tokens, pool, all_tokens, source, start, end, interval, ticks, base_volume,
        usd_volume, offset, closed, label, fill, tz, strict
    ))]
    #[allow(clippy::too_many_arguments)]
    fn bars(
        &self,
        py: Python<'_>,
        token: Option<String>,
        tokens: Option<Vec<String>>,
        pool: Option<String>,
        all_tokens: bool,
        source: &str,
        start: Option<i64>,
        end: Option<i64>,
        interval: Option<i64>,
        ticks: Option<u64>,
        base_volume: Option<f64>,
        usd_volume: Option<f64>,
        offset: i64,
        closed: &str,
        label: &str,
        fill: &str,
        tz: Option<String>,
        strict: bool,
    ) -> PyResult<Answer> {
        let selection = match (token, tokens, pool, all_tokens) {
            (Some(t), None, None, false) => Selection::Token(t),
            (None, Some(ts), None, false) => Selection::Tokens(ts),
            (None, None, Some(p), false) => Selection::Pool(p),
            (None, None, None, true) => Selection::AllTokens,
            _ => {
                return Err(invalid(
                    "tokens",
                    "give one of tokens, pool or all_tokens=True",
                ))
                .py(py);
            }
        };
        let source = source_of(source).py(py)?;
        let range = TimeRange {
            from: instant(start, "start").py(py)?,
            to: instant(end, "end").py(py)?,
        };
        let rule = match (ticks, base_volume, usd_volume) {
            (Some(n), None, None) => Some(EventRule::Ticks(n)),
            (None, Some(v), None) => Some(EventRule::BaseVolume(v)),
            (None, None, Some(v)) => Some(EventRule::UsdVolume(v)),
            (None, None, None) => None,
            _ => {
                return Err(invalid(
                    "ticks",
                    "give at most one of ticks, base_volume and usd_volume",
                ))
                .py(py);
            }
        };
        let time_options = match rule {
            Some(_) => None,
            None => Some(BarOptions {
                width_seconds: interval
                    .ok_or_else(|| {
                        invalid(
                            "interval",
                            "give interval, ticks, base_volume or usd_volume",
                        )
                    })
                    .py(py)?,
                offset_seconds: offset,
                closed: edge_of(closed, "closed").py(py)?,
                label: edge_of(label, "label").py(py)?,
                fill: fill_of(fill).py(py)?,
                time_zone: tz,
                data_end: None,
                unfetched: Default::default(),
            }),
        };
        self.answer(py, strict, |lake| {
            let coverage = coverage::of_events(lake, source, &selection, range)?;
            let frame = match (rule, time_options) {
                (Some(rule), _) => event_bars(lake, source, &selection, range, rule)?,
                (None, Some(mut options)) => {
                    options.unfetched = coverage.unfetched();
                    bars(lake, source, &selection, range, &options)?
                }
                (None, None) => unreachable!("time options are made when no rule is"),
            };
            Ok((frame, coverage))
        })
    }

    /// Price changes and volumes over 5m … 30d at `now`, as `dexlake price-stats` gives them.
    #[pyo3(signature = (tokens, now, source, strict))]
    fn price_stats(
        &self,
        py: Python<'_>,
        tokens: Vec<String>,
        now: Option<i64>,
        source: &str,
        strict: bool,
    ) -> PyResult<Answer> {
        let source = source_of(source).py(py)?;
        let now = instant(now, "now").py(py)?;
        self.answer(py, strict, |lake| {
            let coverage = coverage::of_window(lake, source, &tokens, now, 30 * 86_400)?;
            let frame = price_stats(
                lake,
                &Selection::Tokens(tokens),
                PriceStatsOptions { now, source },
            )?;
            Ok((frame, coverage))
        })
    }

    /// Wallet PnL as `dexlake pnl` gives it: one wallet, or every wallet when `wallet` is
    /// `None`; `table` is `ledgers` (one row per wallet and token), `positions` or `lots`.
    #[pyo3(signature = (wallet, token, method, mark, oversell, dust, table, strict))]
    #[allow(clippy::too_many_arguments)]
    fn pnl(
        &self,
        py: Python<'_>,
        wallet: Option<String>,
        token: Option<String>,
        method: &str,
        mark: &str,
        oversell: &str,
        dust: f64,
        table: &str,
        strict: bool,
    ) -> PyResult<Answer> {
        if !matches!(table, "ledgers" | "positions" | "lots") {
            return Err(invalid(
                "table",
                format!("{table:?}: expected \"ledgers\", \"positions\" or \"lots\""),
            ))
            .py(py);
        }
        let config = pnl_config(method, mark, oversell, dust, table == "lots").py(py)?;
        let table = table.to_owned();
        self.answer(py, strict, |lake| {
            let wallets = wallet.as_ref().map(std::slice::from_ref);
            let coverage = coverage::of_wallets(lake, wallets, token.as_deref())?;
            let query = PnlQuery {
                wallets: wallet.clone().map(|w| vec![w]),
                token: token.clone(),
            };
            let frame = if wallet.is_some() || table == "positions" {
                pnl_table(pnl::wallet_pnl(lake, &query, &config)?, &table)
            } else {
                // Every wallet's ledgers (or lots) without the positions table.
                pnl_table(pnl::wallet_ledgers(lake, &query, &config)?, &table)
            };
            Ok((frame, coverage))
        })
    }

    /// Wallets ranked by total PnL, the first `top`, as `dexlake pnl --top` ranks them.
    #[pyo3(signature = (top, method, mark, oversell, dust, strict))]
    #[allow(clippy::too_many_arguments)]
    fn leaderboard(
        &self,
        py: Python<'_>,
        top: usize,
        method: &str,
        mark: &str,
        oversell: &str,
        dust: f64,
        strict: bool,
    ) -> PyResult<Answer> {
        let config = pnl_config(method, mark, oversell, dust, false).py(py)?;
        self.answer(py, strict, |lake| {
            let coverage = coverage::of_wallets(lake, None, None)?;
            Ok((pnl::leaderboard(lake, &config, top)?, coverage))
        })
    }

    /// One wallet's trading metrics (or, with `curve`, its equity curve), as `dexlake pnl
    /// --performance` gives them.
    #[pyo3(signature = (
        wallet, method, mark, oversell, dust, period, periods_per_year, risk_free, capital,
        curve, strict
    ))]
    #[allow(clippy::too_many_arguments)]
    fn performance(
        &self,
        py: Python<'_>,
        wallet: String,
        method: &str,
        mark: &str,
        oversell: &str,
        dust: f64,
        period: &str,
        periods_per_year: f64,
        risk_free: f64,
        capital: Option<f64>,
        curve: bool,
        strict: bool,
    ) -> PyResult<Answer> {
        let config = pnl_config(method, mark, oversell, dust, false).py(py)?;
        let equity = EquityConfig {
            period_seconds: parse_span(period, "period").py(py)?,
            initial_capital: capital,
            ratios: RatioConfig {
                periods_per_year,
                risk_free,
            },
        };
        equity.validate().py(py)?;
        self.answer(py, strict, |lake| {
            let coverage = coverage::of_wallets(lake, Some(std::slice::from_ref(&wallet)), None)?;
            let perf = pnl::lake_wallet_performance(lake, &wallet, &config, &equity)?;
            Ok((if curve { perf.curve } else { perf.metrics }, coverage))
        })
    }

    /// The window metrics of one token, as `dexlake token-metrics` gives them.
    #[pyo3(signature = (token, windows, now, strict))]
    fn token_metrics(
        &self,
        py: Python<'_>,
        token: String,
        windows: Option<Vec<String>>,
        now: Option<i64>,
        strict: bool,
    ) -> PyResult<Answer> {
        let windows = match windows {
            None => Window::service_windows(),
            Some(ws) => ws
                .iter()
                .map(|w| Window::parse(w))
                .collect::<dexlake::Result<Vec<_>>>()
                .py(py)?,
        };
        let now = instant(now, "now").py(py)?;
        self.answer(py, strict, |lake| {
            let widest = windows.iter().map(|w| w.seconds).max().unwrap_or(0);
            let coverage = coverage::of_window(
                lake,
                EventSource::Trades,
                std::slice::from_ref(&token),
                now,
                widest,
            )?;
            Ok((
                token_metrics::token_metrics(lake, &token, &windows, now)?,
                coverage,
            ))
        })
    }

    /// A search-profiles request (JSON) answered from the lake's profile snapshot `snapshot`
    /// (`None`: the newest), as the service's JSON body `{count, cursor, data}`.
    #[pyo3(signature = (request, snapshot, strict))]
    fn search(
        &self,
        py: Python<'_>,
        request: &str,
        snapshot: Option<i64>,
        strict: bool,
    ) -> PyResult<(String, Vec<String>)> {
        let request: SearchRequest = serde_json::from_str(request)
            .map_err(|e| invalid("request", format!("not a search-profiles request: {e}")))
            .py(py)?;
        let snapshot = match instant(snapshot, "snapshot").py(py)? {
            None => ProfileSnapshot::Latest,
            Some(t) => ProfileSnapshot::At(t),
        };
        let lake = &self.lake;
        let (page, coverage) = py
            .detach(|| -> dexlake::Result<_> {
                let coverage = coverage::of_profiles(lake, &snapshot)?;
                Ok((screener::search(lake, &request, snapshot)?, coverage))
            })
            .py(py)?;
        let notes = covered(py, &coverage, strict)?;
        let body = serde_json::to_string(&page)
            .map_err(|e| invalid("request", format!("the answer is not JSON: {e}")))
            .py(py)?;
        Ok((body, notes))
    }

    /// What the lake covers (`dexlake status --format json`), as JSON.
    fn status(&self, py: Python<'_>) -> PyResult<String> {
        let status = py.detach(|| coverage::status(&self.lake)).py(py)?;
        serde_json::to_string(&status)
            .map_err(|e| invalid("status", e.to_string()))
            .py(py)
    }

    /// Checks the lake against its manifest (`dexlake verify`).
    fn verify(&self, py: Python<'_>) -> PyResult<VerifyAnswer> {
        let report = py.detach(|| self.lake.verify()).py(py)?;
        Ok(VerifyAnswer {
            ok: report.is_ok(),
            version: report.version,
            files_checked: report.files_checked,
            rows: by_name(&report.rows),
            problems: report.problems.iter().map(ToString::to_string).collect(),
            unreferenced: report.unreferenced,
        })
    }

    /// Merges each partition's small files (`dexlake compact`).
    fn compact(&self, py: Python<'_>) -> PyResult<(usize, usize, usize, BTreeMap<String, u64>)> {
        let report = py.detach(|| self.lake.compact()).py(py)?;
        Ok((
            report.partitions,
            report.files_removed,
            report.files_added,
            by_name(&report.rows),
        ))
    }
}

/// Rows per dataset, by the dataset's name.
fn by_name(rows: &BTreeMap<Dataset, u64>) -> BTreeMap<String, u64> {
    rows.iter()
        .map(|(d, n)| (d.name().to_owned(), *n))
        .collect()
}

/// What `verify` found, for the Python layer's dict.
#[derive(IntoPyObject)]
pub struct VerifyAnswer {
    ok: bool,
    version: u64,
    files_checked: usize,
    rows: BTreeMap<String, u64>,
    problems: Vec<String>,
    unreferenced: Vec<String>,
}
