//! The live event stream of `/api/events` and the follow's state of `/api/follow`.
//!
//! A server started with a [`Feed`] follows tokens: whoever polls the market (the CLI runs
//! the library's follower) [`publish`](Feed::publish)es each poll's closed bars, the open bars
//! and the watermark, and every open stream of a followed token receives them as server-sent
//! events:
//!
//! - `hello` (first, with the reconnection delay): `{"token", "interval", "watermark"}`;
//! - `bar`, a closed bar, its `id:` the bar's time (its bucket's start, Unix seconds);
//! - `openbar`: `{"bar", "watermark"}`, the token's open bar (or `null`) after a poll (not
//!   `open`, which a browser's `EventSource` fires itself when it connects).
//!
//! **Resuming.** A stream asked with `since=S` (or reconnecting with `Last-Event-ID: S`, which
//! wins) first gets, from the lake, the closed bars after `S` up to the watermark, then the
//! bars the follow closes next: each bar once, in time order. The id is the bar's time, so a
//! server restarted on the same lake (its follower resumes at the committed watermark)
//! answers a page that reconnects with what it missed. The stream subscribes before it reads
//! the watermark, under the lock a publication takes, so no bar falls between the lake's part
//! and the live part.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{RawQuery, State as Shared};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use polars::prelude::DataFrame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::params::Params;
use super::reply;
use super::routes::State;
use crate::query::{Bars, LakeQuery as _, json_rows};
use crate::{Error, ErrorKind, Result};

/// How long a page waits before it reconnects, milliseconds.
const RETRY: Duration = Duration::from_millis(1000);

/// Publications a slow stream may fall behind by before it is closed (its page reconnects and
/// resumes from the lake).
const BACKLOG: usize = 1024;

/// The bars of a follow, for the server's event streams (see the module documentation).
#[derive(Debug, Clone)]
pub struct Feed {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    interval: i64,
    tokens: BTreeSet<String>,
    latest: Mutex<Latest>,
    sender: broadcast::Sender<Arc<Event>>,
}

/// What a new stream starts from.
#[derive(Debug, Default, Clone)]
struct Latest {
    /// The follow's watermark, µs.
    watermark: Option<i64>,
    /// Each token's open bar.
    open: BTreeMap<String, Value>,
}

#[derive(Debug)]
enum Event {
    /// A closed bar of `token` at `time` (Unix seconds).
    Bar {
        token: String,
        time: i64,
        row: Value,
    },
    /// The open bars and the watermark after a poll.
    Open(Latest),
}

impl Feed {
    /// The feed of a follow of `tokens` in bars of `interval_seconds`, at `watermark` (the
    /// follower's, when it resumed one).
    pub fn new(
        tokens: &[String],
        interval_seconds: i64,
        watermark: Option<DateTime<Utc>>,
    ) -> Result<Feed> {
        if interval_seconds <= 0 {
            return Err(Error::InvalidArgument {
                argument: "interval".into(),
                reason: format!("must be a positive number of seconds, got {interval_seconds}"),
            });
        }
        let (sender, _) = broadcast::channel(BACKLOG);
        Ok(Feed {
            inner: Arc::new(Inner {
                interval: interval_seconds,
                tokens: tokens.iter().cloned().collect(),
                latest: Mutex::new(Latest {
                    watermark: watermark.map(|w| w.timestamp_micros()),
                    open: BTreeMap::new(),
                }),
                sender,
            }),
        })
    }

    /// Publishes a poll: the bars it closed (`token_address` and the bar columns, as the
    /// follower returns them), each token's open bar (the same columns) and the watermark.
    pub fn publish(
        &self,
        closed: &DataFrame,
        open: &DataFrame,
        watermark: Option<DateTime<Utc>>,
    ) -> Result<()> {
        let mut bars = Vec::new();
        for row in json_rows(closed)? {
            let (token, time) = key(&row)?;
            bars.push(Event::Bar { token, time, row });
        }
        let mut opened = BTreeMap::new();
        for row in json_rows(open)? {
            let (token, _) = key(&row)?;
            opened.insert(token, row);
        }
        let mut latest = self.lock();
        if watermark.is_some() {
            latest.watermark = watermark.map(|w| w.timestamp_micros());
        }
        latest.open = opened;
        // Sent under the lock: a stream subscribes and reads the watermark under it too.
        for bar in bars {
            let _ = self.inner.sender.send(Arc::new(bar));
        }
        let _ = self
            .inner
            .sender
            .send(Arc::new(Event::Open(latest.clone())));
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Latest> {
        self.inner.latest.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The end of the data of `token` its bars are computed to, when the server follows it:
    /// the lake holds every swap before the watermark, so the query's bars before it are
    /// complete and the bar that reaches it is `incomplete`. `/api/bars` of the token and a
    /// stream's catch-up both take it, so a page's first load and its stream agree.
    pub(super) fn data_end(&self, token: &str) -> Option<DateTime<Utc>> {
        if !self.inner.tokens.contains(token) {
            return None;
        }
        self.lock().data_end()
    }

    /// The state `/api/follow` shows.
    fn state(&self) -> Value {
        let latest = self.lock();
        json!({
            "following": true,
            "tokens": self.inner.tokens,
            "interval": self.inner.interval,
            "watermark": latest.watermark.and_then(DateTime::from_timestamp_micros),
        })
    }
}

impl Latest {
    /// The watermark as the data's end ([`Feed::data_end`]).
    fn data_end(&self) -> Option<DateTime<Utc>> {
        self.watermark.and_then(DateTime::from_timestamp_micros)
    }
}

/// A row's token and time (Unix seconds).
fn key(row: &Value) -> Result<(String, i64)> {
    let token = row["token_address"].as_str();
    let time = row["timestamp"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok());
    match (token, time) {
        (Some(token), Some(time)) => Ok((token.to_owned(), time.timestamp())),
        _ => Err(Error::InvalidArgument {
            argument: "bars".into(),
            reason: format!("a published bar needs token_address and timestamp: {row}"),
        }),
    }
}

/// `/api/follow`: what the server follows, its bars' interval and its watermark.
pub(super) async fn follow(Shared(state): Shared<Arc<State>>, RawQuery(q): RawQuery) -> Response {
    if let Err(e) = Params::parse(q.as_deref(), &[]) {
        return reply::error(&e);
    }
    let value = match &state.feed {
        Some(feed) => feed.state(),
        None => json!({"following": false, "tokens": [], "interval": null, "watermark": null}),
    };
    reply::json(StatusCode::OK, &value)
}

/// `/api/events?token=T[&since=S]`: the token's bars as server-sent events.
pub(super) async fn events(
    Shared(state): Shared<Arc<State>>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Response {
    let Some(feed) = state.feed.clone() else {
        return reply::refusal(
            StatusCode::NOT_FOUND,
            "this server follows no token: start it with --follow TOKENS for live bars",
        );
    };
    let (token, since) = match stream_params(&headers, q.as_deref()) {
        Ok(asked) => asked,
        Err(e) => return reply::error(&e),
    };
    if !feed.inner.tokens.contains(&token) {
        return reply::refusal(
            StatusCode::NOT_FOUND,
            &format!("this server does not follow {token}; it follows {}", {
                let t: Vec<&str> = feed.inner.tokens.iter().map(String::as_str).collect();
                t.join(", ")
            }),
        );
    }
    // Subscribed before the watermark is read, under the publications' lock.
    let (mut live, latest) = {
        let latest = feed.lock();
        (feed.inner.sender.subscribe(), latest.clone())
    };
    let interval = feed.inner.interval;
    let missed = match (since, latest.data_end()) {
        (Some(since), Some(data_end)) => {
            match missed(&state, &token, interval, since, data_end).await {
                Ok(rows) => rows,
                Err(e) => return reply::error(&e),
            }
        }
        _ => Vec::new(),
    };
    let (tx, rx) = mpsc::channel::<Sse>(64);
    let mut stopping = state.stopping.subscribe();
    tokio::spawn(async move {
        let hello = json!({
            "token": token,
            "interval": interval,
            "watermark": latest.watermark.and_then(DateTime::from_timestamp_micros),
        });
        let first = Sse::default()
            .event("hello")
            .retry(RETRY)
            .data(hello.to_string());
        if tx.send(first).await.is_err() {
            return;
        }
        let mut last = since;
        for (time, row) in missed {
            if tx.send(bar(time, &row)).await.is_err() {
                return;
            }
            last = Some(time);
        }
        if tx.send(open(&latest, &token)).await.is_err() {
            return;
        }
        loop {
            let event = tokio::select! {
                event = live.recv() => event,
                _ = stopping.changed() => return,
            };
            let sse = match event {
                Ok(event) => match &*event {
                    Event::Bar {
                        token: t,
                        time,
                        row,
                    } if *t == token => {
                        if last.is_some_and(|l| *time <= l) {
                            continue;
                        }
                        last = Some(*time);
                        bar(*time, row)
                    }
                    Event::Bar { .. } => continue,
                    Event::Open(latest) => open(latest, &token),
                },
                // Fallen behind, or the feed is gone: the page reconnects and resumes.
                Err(_) => return,
            };
            if tx.send(sse).await.is_err() {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    axum::response::sse::Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The token and the time after which bars are wanted: `Last-Event-ID` (a reconnection), else
/// `since`.
fn stream_params(headers: &HeaderMap, query: Option<&str>) -> Result<(String, Option<i64>)> {
    let p = Params::parse(query, &["token", "since"])?;
    let Some(token) = p.address("token")? else {
        return Err(Error::InvalidArgument {
            argument: "token".into(),
            reason: "give the token".into(),
        });
    };
    let resumed = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|t| t.trim().parse::<i64>().ok())
                .ok_or_else(|| Error::InvalidArgument {
                    argument: "Last-Event-ID".into(),
                    reason: "expected the time of a bar, Unix seconds".into(),
                })
        })
        .transpose()?;
    Ok((token, resumed.or(p.number::<i64>("since")?)))
}

/// The closed bars of `token` after the bar at `since` (Unix seconds) up to the watermark's
/// bucket, from the lake: the query's time bars to the watermark as the data's end
/// ([`Feed::data_end`]), as `/api/bars` answers them.
async fn missed(
    state: &Arc<State>,
    token: &str,
    interval: i64,
    since: i64,
    data_end: DateTime<Utc>,
) -> Result<Vec<(i64, Value)>> {
    let from = since.saturating_add(interval);
    let to = data_end.timestamp().div_euclid(interval) * interval;
    if from >= to {
        return Ok(Vec::new());
    }
    let span = |t: i64| {
        DateTime::from_timestamp(t, 0).ok_or_else(|| Error::InvalidArgument {
            argument: "since".into(),
            reason: format!("{t} is not a time"),
        })
    };
    let (from, to) = (span(from)?, span(to)?);
    super::bounds::buckets(interval, from, to)?;
    let _permit = state
        .permits
        .acquire()
        .await
        .map_err(|_| Error::Interrupted {
            what: "the server is stopping".into(),
        })?;
    let lake = state.lake.clone();
    let token = token.to_owned();
    let rows = tokio::task::spawn_blocking(move || -> Result<Vec<Value>> {
        let answer = lake
            .query()
            .token(token)
            .since(from)
            .until(to)
            .bars_covered(Bars::every(interval).data_end(data_end));
        match answer {
            Ok(answer) => json_rows(&answer.value),
            Err(e) if e.kind() == ErrorKind::NoData => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    })
    .await
    .map_err(|source| Error::Task {
        context: "reading the bars a stream missed".into(),
        source,
    })??;
    rows.into_iter()
        .map(|row| {
            let time = row["timestamp"]
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp())
                .ok_or_else(|| Error::InvalidArgument {
                    argument: "bars".into(),
                    reason: format!("a bar without a time: {row}"),
                })?;
            Ok((time, row))
        })
        .collect()
}

fn bar(time: i64, row: &Value) -> Sse {
    Sse::default()
        .event("bar")
        .id(time.to_string())
        .data(row.to_string())
}

fn open(latest: &Latest, token: &str) -> Sse {
    let data = json!({
        "bar": latest.open.get(token),
        "watermark": latest.watermark.and_then(DateTime::from_timestamp_micros),
    });
    Sse::default().event("openbar").data(data.to_string())
}
