//! The API's handlers: each reads its query parameters (the CLI's flag names, `params.rs`),
//! asks the lake's query one question, and writes the answer (`reply.rs`). The rules of an
//! answer are the query's; the parameters' rules are the library's parsers; a handler only
//! maps one to the other, as the CLI's command does.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State as Shared};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::params::Params;
use super::routes::State;
use super::{bounds, reply};
use crate::analytics::Edge;
use crate::analytics::metrics::RatioConfig;
use crate::analytics::pnl::{CostMethod, EquityConfig, Mark, OversellPolicy, PnlConfig, PnlTable};
use crate::analytics::token_metrics::parse_span;
use crate::api::profile_query::SearchRequest;
use crate::lake::Lake;
use crate::query::{Answer, Bars, LakeQuery as _, Query, args, json_rows};
use crate::{Error, Result};

/// The routes under `/api/`.
pub(super) fn routes() -> Router<Arc<State>> {
    Router::new()
        .route("/bars", get(bars))
        .route("/price_stats", get(price_stats))
        .route("/pnl", get(pnl))
        .route("/leaderboard", get(leaderboard))
        .route("/token_metrics", get(token_metrics))
        .route("/search", get(search_get).post(search_post))
        .route("/status", get(status))
        .route("/check", get(check))
        .route("/history", get(history))
}

/// Answers on the blocking pool (the query reads files and computes with polars and rayon),
/// at most [`bounds::MAX_CONCURRENT`] at once.
async fn ask(
    state: Arc<State>,
    question: impl FnOnce(&Lake) -> Result<Value> + Send + 'static,
) -> Response {
    let Ok(_permit) = state.permits.acquire().await else {
        return reply::refusal(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping");
    };
    let lake = state.lake.clone();
    match tokio::task::spawn_blocking(move || question(&lake)).await {
        Ok(Ok(value)) => reply::json(StatusCode::OK, &value),
        Ok(Err(e)) => reply::error(&e),
        Err(source) => reply::error(&Error::Task {
            context: "answering a request".into(),
            source,
        }),
    }
}

/// A frame answer with its rows as `data`, refused above [`bounds::MAX_ROWS`] rows.
fn rows(answer: Answer<polars::prelude::DataFrame>, narrow: &str) -> Result<Value> {
    bounds::rows(answer.value.height(), narrow)?;
    let data = Value::Array(json_rows(&answer.value)?);
    reply::answer(&answer, data)
}

/// The query of `token`, `tokens`, `pool` or `all_tokens` (exactly one).
fn select<'a>(query: Query<'a>, p: &Params) -> Result<Query<'a>> {
    Ok(
        match p.one_of(&["token", "tokens", "pool", "all_tokens"])? {
            "token" => query.token(p.address("token")?.unwrap_or_default()),
            "tokens" => query.tokens(p.addresses("tokens")?.unwrap_or_default()),
            "pool" => query.pool(p.address("pool")?.unwrap_or_default()),
            _ => {
                if !p.flag("all_tokens")? {
                    return Err(Error::InvalidArgument {
                        argument: "token".into(),
                        reason: "give one of token, tokens, pool, all_tokens".into(),
                    });
                }
                query
            }
        },
    )
}

/// `/api/bars`: `dexlake ohlcv`.
async fn bars(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    let feed = state.feed.clone();
    ask(state, move |lake| {
        let p = Params::parse(
            q.as_deref(),
            &[
                "token",
                "tokens",
                "pool",
                "all_tokens",
                "interval",
                "ticks",
                "base_volume",
                "usd_volume",
                "from",
                "to",
                "source",
                "chain_id",
                "series_interval",
                "fill",
                "tz",
                "offset",
                "closed",
                "label",
                "strict",
            ],
        )?;
        let mut query = select(lake.query(), &p)?.strict(p.flag("strict")?);
        query = query.bars_source(p.text("source").unwrap_or("swaps"), p.number("chain_id")?)?;
        if let Some(seconds) = p.number("series_interval")? {
            query = query.series_interval(seconds);
        }
        let (from, to) = (p.time("from")?, p.time("to")?);
        if let Some(from) = from {
            query = query.since(from);
        }
        if let Some(to) = to {
            query = query.until(to);
        }
        let interval = p.number::<i64>("interval")?;
        if let (Some(interval), Some(from), Some(to)) = (interval, from, to) {
            bounds::buckets(interval, from, to)?;
        }
        let mut bars = Bars::of(
            interval,
            p.number("ticks")?,
            p.number("base_volume")?,
            p.number("usd_volume")?,
        )?;
        // Time options only when given: the query refuses them on tick, volume and dollar bars.
        if let Some(offset) = p.number("offset")? {
            bars = bars.offset(offset);
        }
        for side in ["closed", "label"] {
            if let Some(text) = p.text(side) {
                let edge = Edge::parse(text, side)?;
                bars = if side == "closed" {
                    bars.closed(edge)
                } else {
                    bars.label(edge)
                };
            }
        }
        if let Some(fill) = p.value("fill")? {
            bars = bars.fill(fill);
        }
        // A followed token's time bars end at the follow's watermark, as its stream's do.
        let followed = match (&feed, interval, p.address("token")?) {
            (Some(feed), Some(_), Some(token)) => feed.data_end(&token),
            _ => None,
        };
        if let Some(end) = followed {
            bars = bars.data_end(end);
        }
        if let Some(zone) = p.text("tz") {
            bars = bars.time_zone(zone);
        }
        rows(
            query.bars_covered(bars)?,
            "narrow the range (from, to) or widen the interval",
        )
    })
    .await
}

/// `/api/price_stats`: `dexlake price-stats`.
async fn price_stats(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        let p = Params::parse(
            q.as_deref(),
            &[
                "tokens",
                "now",
                "source",
                "chain_id",
                "series_interval",
                "strict",
            ],
        )?;
        let Some(tokens) = p.addresses("tokens")? else {
            return Err(Error::InvalidArgument {
                argument: "tokens".into(),
                reason: "give the tokens (comma-separated)".into(),
            });
        };
        let mut query = lake
            .query()
            .tokens(tokens)
            .strict(p.flag("strict")?)
            .bars_source(p.text("source").unwrap_or("swaps"), p.number("chain_id")?)?;
        if let Some(seconds) = p.number("series_interval")? {
            query = query.series_interval(seconds);
        }
        rows(
            query.price_stats_covered(p.time("now")?)?,
            "name fewer tokens",
        )
    })
    .await
}

/// The PnL options `pnl` and `leaderboard` share, checked before the lake is read.
const PNL_OPTIONS: [&str; 5] = ["method", "mark", "oversell", "dust", "strict"];

fn pnl_config(p: &Params, lots: bool) -> Result<PnlConfig> {
    let config = PnlConfig {
        method: p.value::<CostMethod>("method")?.unwrap_or_default(),
        oversell: p.value::<OversellPolicy>("oversell")?.unwrap_or_default(),
        mark: p.value::<Mark>("mark")?.unwrap_or_default(),
        dust: p.number("dust")?.unwrap_or(0.0),
        lots,
    };
    config.validate()?;
    Ok(config)
}

/// `/api/pnl`: `dexlake pnl` (but `--top`, which is `/api/leaderboard`).
async fn pnl(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        let mut allowed = vec![
            "wallet",
            "token",
            "lots",
            "positions",
            "performance",
            "curve",
            "period",
            "periods_per_year",
            "risk_free",
            "capital",
            "all_wallets",
        ];
        allowed.extend(PNL_OPTIONS);
        let p = Params::parse(q.as_deref(), &allowed)?;
        p.conflicts("lots", &["positions", "performance"])?;
        p.conflicts("positions", &["performance"])?;
        p.conflicts("all_wallets", &["wallet", "performance"])?;
        let (lots, positions, performance) = (
            p.flag("lots")?,
            p.flag("positions")?,
            p.flag("performance")?,
        );
        let curve = p.flag("curve")?;
        if curve && !performance {
            return Err(Error::InvalidArgument {
                argument: "curve".into(),
                reason: "needs performance".into(),
            });
        }
        let config = pnl_config(&p, lots)?;
        let query = lake.query().strict(p.flag("strict")?);
        let table = if lots {
            PnlTable::Lots
        } else if positions {
            PnlTable::Positions
        } else {
            PnlTable::Ledgers
        };
        let query = match p.address("token")? {
            Some(token) if !performance => query.token(token),
            _ => query,
        };
        let narrow = "name a wallet or a token";
        if p.flag("all_wallets")? {
            return rows(query.pnl_table(&config, table)?, narrow);
        }
        let Some(wallet) = p.address("wallet")? else {
            return Err(Error::InvalidArgument {
                argument: "wallet".into(),
                reason: "give wallet=W (or all_wallets, or /api/leaderboard?top=N)".into(),
            });
        };
        let query = query.wallet(wallet);
        if performance {
            let equity = EquityConfig {
                period_seconds: parse_span(p.text("period").unwrap_or("1d"), "period")?,
                initial_capital: p.number("capital")?,
                ratios: RatioConfig {
                    periods_per_year: p.number("periods_per_year")?.unwrap_or(365.0),
                    risk_free: p.number("risk_free")?.unwrap_or(0.0),
                },
            };
            let answer = query
                .performance_covered(&config, &equity)?
                .map(|perf| if curve { perf.curve } else { perf.metrics });
            return rows(answer, "widen the period");
        }
        rows(query.pnl_table(&config, table)?, narrow)
    })
    .await
}

/// `/api/leaderboard`: `dexlake pnl --top N`.
async fn leaderboard(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        let mut allowed = vec!["top"];
        allowed.extend(PNL_OPTIONS);
        let p = Params::parse(q.as_deref(), &allowed)?;
        let Some(top) = p.number::<usize>("top")? else {
            return Err(Error::InvalidArgument {
                argument: "top".into(),
                reason: "give top=N, the number of wallets to rank".into(),
            });
        };
        bounds::at_most("top", top, bounds::MAX_TOP)?;
        let config = pnl_config(&p, false)?;
        let query = lake.query().strict(p.flag("strict")?);
        rows(
            query.leaderboard_covered(top, &config)?,
            "ask for fewer wallets",
        )
    })
    .await
}

/// `/api/token_metrics`: `dexlake token-metrics`.
async fn token_metrics(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        let p = Params::parse(q.as_deref(), &["token", "window", "now", "strict"])?;
        let Some(token) = p.address("token")? else {
            return Err(Error::InvalidArgument {
                argument: "token".into(),
                reason: "give the token".into(),
            });
        };
        let windows: Vec<&str> = p
            .text("window")
            .map_or(Vec::new(), |w| w.split(',').collect());
        bounds::at_most("window", windows.len(), bounds::MAX_TOKENS)?;
        // `--now` is RFC 3339 as clap reads a time.
        let now = p.number::<DateTime<Utc>>("now")?;
        let answer = lake
            .query()
            .token(token)
            .strict(p.flag("strict")?)
            .token_metrics_covered(&windows, now)?;
        rows(answer, "ask for fewer windows")
    })
    .await
}

const SEARCH_PARAMS: [&str; 3] = ["snapshot", "chain_id", "strict"];

/// `GET /api/search?request=JSON`: `dexlake search`.
async fn search_get(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        let mut allowed = vec!["request"];
        allowed.extend(SEARCH_PARAMS);
        let p = Params::parse(q.as_deref(), &allowed)?;
        let Some(body) = p.text("request") else {
            return Err(Error::InvalidArgument {
                argument: "request".into(),
                reason: "give the search request as JSON (request=…), or POST it".into(),
            });
        };
        search(lake, &p, body)
    })
    .await
}

/// `POST /api/search` with the request as the body: `dexlake search`.
async fn search_post(
    Shared(state): Shared<Arc<State>>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Response {
    ask(state, move |lake| {
        let p = Params::parse(q.as_deref(), &SEARCH_PARAMS)?;
        let body = std::str::from_utf8(&body).map_err(|e| Error::InvalidArgument {
            argument: "request".into(),
            reason: format!("the body is not UTF-8: {e}"),
        })?;
        search(lake, &p, body)
    })
    .await
}

/// The search answer: `count` and `cursor` of the page beside its profiles as `data`.
fn search(lake: &Lake, p: &Params, body: &str) -> Result<Value> {
    let request = SearchRequest::from_json(body)?;
    let snapshot = args::snapshot(p.text("snapshot").unwrap_or("latest")).map_err(|reason| {
        Error::InvalidArgument {
            argument: "snapshot".into(),
            reason,
        }
    })?;
    let query = lake.query().strict(p.flag("strict")?);
    let answer = match p.number::<i64>("chain_id")? {
        None => query.search_covered(&request, snapshot)?,
        Some(chain_id) => query.search_evm_covered(chain_id, &request, snapshot)?,
    };
    let (count, cursor) = (answer.value.count, answer.value.cursor.clone());
    let data = Value::Array(answer.value.data.clone());
    let mut value = reply::answer(&answer, data)?;
    value["count"] = json!(count);
    value["cursor"] = json!(cursor);
    Ok(value)
}

/// `/api/status`: `dexlake status --format json`, as `{"version", "data"}`.
async fn status(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        Params::parse(q.as_deref(), &[])?;
        let status = lake.query().status()?;
        Ok(json!({"version": status.version, "data": to_json(&status)?}))
    })
    .await
}

/// `/api/check`: `dexlake check --format json`, as `{"version", "data"}`.
async fn check(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        let p = Params::parse(q.as_deref(), &["token", "examples"])?;
        let examples = p
            .number("examples")?
            .unwrap_or(crate::analytics::quality::DEFAULT_EXAMPLES);
        bounds::at_most("examples", examples, bounds::MAX_EXAMPLES)?;
        let query = match p.addresses("token")? {
            Some(tokens) => lake.query().tokens(tokens),
            None => lake.query(),
        };
        let report = query.check(examples, &|_| {})?;
        Ok(json!({"version": report.version, "data": to_json(&report)?}))
    })
    .await
}

/// `/api/history`: `dexlake log --format json`, as `{"version", "data"}`.
async fn history(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    ask(state, move |lake| {
        let p = Params::parse(q.as_deref(), &["dataset"])?;
        let dataset: Option<crate::lake::Dataset> = p.value("dataset")?;
        let version = lake.version()?;
        let mut history = lake.history()?;
        if let Some(d) = dataset {
            history.records.retain_mut(|r| {
                r.datasets.retain(|k, _| *k == d);
                !r.datasets.is_empty()
            });
        }
        bounds::rows(history.records.len(), "name a dataset")?;
        let data = json!({
            "records": to_json(&history.records)?,
            "unrecorded_before": history.unrecorded_before,
        });
        Ok(json!({"version": version, "data": data}))
    })
    .await
}

fn to_json(value: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::Lake {
        path: "answer".into(),
        message: format!("not writable as JSON: {e}"),
    })
}
