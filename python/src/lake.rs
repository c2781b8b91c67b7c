//! `Lake`: one open lake and the analytics on it, each one question of the lake's query
//! (`dexlake::query`) asked with the GIL released, its frame returned as a [`FrameStream`] and
//! its warnings beside it (with `strict`, incomplete coverage is the query's refusal).
//!
//! Instants arrive as Unix microseconds (the Python layer converts `datetime`s, strings and
//! seconds); every other argument is checked by the crate, which names it when it refuses it.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use dexlake::analytics::metrics::RatioConfig;
use dexlake::analytics::pnl::{
    CostMethod, EquityConfig, Mark, OversellPolicy, PnlConfig, PnlTable,
};
use dexlake::analytics::screener::ProfileSnapshot;
use dexlake::analytics::token_metrics::parse_span;
use dexlake::analytics::{Edge, Fill};
use dexlake::api::profile_query::SearchRequest;
use dexlake::lake::{Dataset, Lake};
use dexlake::query::{Bars, LakeQuery as _, Query, Warning, WarningKind};
use polars::prelude::*;
use pyo3::prelude::*;

use crate::errors::IntoPy;
use crate::frames::FrameStream;

/// What a scan reads: file locations, hive columns and their types, the columns in order, and
/// an empty frame of them when no file is committed.
type ScanPlan = (
    Vec<String>,
    Vec<(String, &'static str)>,
    Vec<String>,
    Option<FrameStream>,
);

/// A frame and its answer's warnings, as (kind, text) pairs.
type Answer = (FrameStream, Vec<(&'static str, String)>);

/// An open lake (`dexlake.Lake` wraps it).
#[pyclass(module = "dexlake._dexlake", frozen)]
pub struct NativeLake {
    pub lake: Arc<Lake>,
    root: String,
}

pub(crate) fn invalid(argument: &str, reason: impl Into<String>) -> dexlake::Error {
    dexlake::Error::InvalidArgument {
        argument: argument.into(),
        reason: reason.into(),
    }
}

pub(crate) fn instant(
    micros: Option<i64>,
    argument: &str,
) -> dexlake::Result<Option<DateTime<Utc>>> {
    micros
        .map(|m| {
            DateTime::from_timestamp_micros(m)
                .ok_or_else(|| invalid(argument, format!("{m} µs is outside the dates supported")))
        })
        .transpose()
}

/// The bars of the CLI's `ohlcv` flags: the rule (interval, ticks, base volume or USD volume;
/// none at all is one-minute time bars, `Bars::of_defaulting`), then the time options.
pub(crate) fn bars_of(
    (interval, ticks, base_volume, usd_volume): (
        Option<i64>,
        Option<u64>,
        Option<f64>,
        Option<f64>,
    ),
    offset: i64,
    closed: &str,
    label: &str,
    fill: &str,
    tz: Option<String>,
) -> dexlake::Result<Bars> {
    let mut bars = Bars::of_defaulting(interval, ticks, base_volume, usd_volume)?
        .offset(offset)
        .closed(Edge::parse(closed, "closed")?)
        .label(Edge::parse(label, "label")?)
        .fill(fill.parse::<Fill>()?);
    if let Some(zone) = tz {
        bars = bars.time_zone(zone);
    }
    Ok(bars)
}

/// The PnL configuration of the CLI's `pnl` flags.
pub(crate) fn pnl_config(
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

impl NativeLake {
    /// Asks `ask` of the lake's query (strict as asked) with the GIL released; the answer's
    /// frame and its warnings as (kind, text) pairs.
    fn answer(
        &self,
        py: Python<'_>,
        strict: bool,
        ask: impl FnOnce(Query<'_>) -> dexlake::Result<dexlake::query::Answer<DataFrame>> + Send,
    ) -> PyResult<Answer> {
        let answer = py.detach(|| ask(self.lake.query().strict(strict))).py(py)?;
        let warnings = warnings_of(&answer.warnings);
        Ok((FrameStream::new(answer.value), warnings))
    }
}

/// An answer's warnings as (kind, text) pairs: `coverage` (a `CoverageWarning`), else `note`.
pub(crate) fn warnings_of(warnings: &[Warning]) -> Vec<(&'static str, String)> {
    warnings
        .iter()
        .map(|w| {
            let kind = match w.kind {
                WarningKind::Coverage => "coverage",
                _ => "note",
            };
            (kind, w.text.clone())
        })
        .collect()
}

#[pymethods]
impl NativeLake {
    /// Opens the lake at `root` (a folder or `s3://bucket/prefix`): an existing one, or with
    /// `create` a new one.
    #[new]
    #[pyo3(signature = (root, create=false, as_of=None))]
    fn new(py: Python<'_>, root: String, create: bool, as_of: Option<String>) -> PyResult<Self> {
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
                .and_then(|lake| match as_of {
                    Some(text) => lake.at(text.parse::<dexlake::lake::AsOf>()?),
                    None => Ok(lake),
                })
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

    /// The script of `dexlake views` for `engine` (`duckdb` or `spark`): one view per dataset
    /// over exactly the files the handle's version commits.
    fn views(&self, py: Python<'_>, engine: &str) -> PyResult<String> {
        let engine: dexlake::lake::ViewEngine = engine.parse().py(py)?;
        py.detach(|| self.lake.views(engine)).py(py)
    }

    /// The version the handle reads: the one it is pinned to (`as_of`), else the newest
    /// committed (read with the GIL released).
    #[getter]
    fn version(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.lake.version()).py(py)
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
        usd_volume, offset, closed, label, fill, tz, strict, chain_id=None, series_interval=None
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
        chain_id: Option<i64>,
        series_interval: Option<i64>,
    ) -> PyResult<Answer> {
        let (start, end) = (instant(start, "start").py(py)?, instant(end, "end").py(py)?);
        let shape = (interval, ticks, base_volume, usd_volume);
        let bars = bars_of(shape, offset, closed, label, fill, tz).py(py)?;
        self.answer(py, strict, |query| {
            let query = match (token, tokens, pool, all_tokens) {
                (Some(t), None, None, false) => query.token(t),
                (None, Some(ts), None, false) => query.tokens(ts),
                (None, None, Some(p), false) => query.pool(p),
                (None, None, None, true) => query,
                _ => {
                    return Err(invalid(
                        "tokens",
                        "give one of tokens, pool or all_tokens=True",
                    ));
                }
            };
            let mut query = query.bars_source(source, chain_id)?;
            if let Some(seconds) = series_interval {
                query = query.series_interval(seconds);
            }
            if let Some(start) = start {
                query = query.since(start);
            }
            if let Some(end) = end {
                query = query.until(end);
            }
            query.bars_covered(bars)
        })
    }

    /// Price changes and volumes over 5m … 30d at `now`, as `dexlake price-stats` gives them;
    /// `source` `"price_history"` (of `chain_id`) computes them from a stored price history.
    #[pyo3(signature = (tokens, now, source, strict, chain_id=None, series_interval=None))]
    #[allow(clippy::too_many_arguments)]
    fn price_stats(
        &self,
        py: Python<'_>,
        tokens: Vec<String>,
        now: Option<i64>,
        source: &str,
        strict: bool,
        chain_id: Option<i64>,
        series_interval: Option<i64>,
    ) -> PyResult<Answer> {
        let now = instant(now, "now").py(py)?;
        self.answer(py, strict, |query| {
            let mut query = query.tokens(tokens).bars_source(source, chain_id)?;
            if let Some(seconds) = series_interval {
                query = query.series_interval(seconds);
            }
            query.price_stats_covered(now)
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
        let table: PnlTable = table.parse().py(py)?;
        let config = pnl_config(method, mark, oversell, dust, false).py(py)?;
        self.answer(py, strict, |query| {
            let query = match wallet {
                Some(w) => query.wallet(w),
                None => query,
            };
            let query = match token {
                Some(t) => query.token(t),
                None => query,
            };
            query.pnl_table(&config, table)
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
        self.answer(py, strict, |query| query.leaderboard_covered(top, &config))
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
        self.answer(py, strict, |query| {
            let answer = query.wallet(wallet).performance_covered(&config, &equity)?;
            Ok(answer.map(|perf| if curve { perf.curve } else { perf.metrics }))
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
        let now = instant(now, "now").py(py)?;
        let windows = windows.unwrap_or_default();
        self.answer(py, strict, |query| {
            let windows: Vec<&str> = windows.iter().map(String::as_str).collect();
            query.token(token).token_metrics_covered(&windows, now)
        })
    }

    /// A search-profiles request (JSON) answered from the lake's profile snapshot `snapshot`
    /// (`None`: the newest), as the service's JSON body `{count, cursor, data}`; with
    /// `chain_id`, over that EVM chain's profiles.
    #[pyo3(signature = (request, snapshot, strict, chain_id))]
    fn search(
        &self,
        py: Python<'_>,
        request: &str,
        snapshot: Option<i64>,
        strict: bool,
        chain_id: Option<i64>,
    ) -> PyResult<(String, Vec<(&'static str, String)>)> {
        let request = SearchRequest::from_json(request).py(py)?;
        let snapshot = match instant(snapshot, "snapshot").py(py)? {
            None => ProfileSnapshot::Latest,
            Some(t) => ProfileSnapshot::At(t),
        };
        let lake = &self.lake;
        let answer = py
            .detach(|| {
                let query = lake.query().strict(strict);
                match chain_id {
                    None => query.search_covered(&request, snapshot),
                    Some(chain_id) => query.search_evm_covered(chain_id, &request, snapshot),
                }
            })
            .py(py)?;
        let body = serde_json::to_string(&answer.value)
            .map_err(|e| invalid("request", format!("the answer is not JSON: {e}")))
            .py(py)?;
        Ok((body, warnings_of(&answer.warnings)))
    }

    /// The rows a SQL query selects from the lake's datasets, each a table of its committed
    /// files, as `dexlake sql` gives them.
    fn sql(&self, py: Python<'_>, query: &str) -> PyResult<Answer> {
        self.answer(py, false, |q| q.sql(query))
    }

    /// What the lake covers (`dexlake status --format json`), as JSON.
    fn status(&self, py: Python<'_>) -> PyResult<String> {
        let status = py.detach(|| self.lake.query().status()).py(py)?;
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
