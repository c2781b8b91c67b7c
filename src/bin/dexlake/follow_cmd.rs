//! `dexlake follow`: keeps a lake fresh from the service and prints each bar once it closes.
//! The polling, the watermark, the bars and their commits are `dexlake::live::Follower`'s;
//! this module loops, prints and stops.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use dexlake::api::client::{Client, ClientConfig};
use dexlake::lake::Lake;
use dexlake::live::{FollowConfig, Follower, MAX_POLL_SECS, MIN_POLL_SECS, backoff};
use dexlake::sync::CancelToken;
use polars::prelude::DataFrame;

use crate::output::{LiveTable, json_lines};
use crate::{Global, address};

/// How closed bars are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FollowFormat {
    /// One JSON object per bar and line, with the columns of `dexlake ohlcv --format json`.
    Jsonl,
    /// Aligned lines, with the open bars and the follow's state on stderr.
    Table,
}

/// Arguments of `dexlake follow`.
#[derive(Args, Debug)]
pub struct FollowArgs {
    /// A token to follow.
    #[arg(long, value_parser = address)]
    token: Option<String>,
    /// Tokens to follow (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = address)]
    tokens: Vec<String>,
    /// A pool to follow (the bars of the tokens it trades).
    #[arg(long, value_parser = address, conflicts_with_all = ["token", "tokens"])]
    pool: Option<String>,
    /// A wallet whose trades are synced too (it adds no bars).
    #[arg(long, value_parser = address)]
    wallet: Option<String>,
    /// Width of a bar, seconds.
    #[arg(long, default_value_t = 60)]
    interval: i64,
    /// Seconds between polls (the next poll starts this long after the last one started);
    /// 0.05 to 86400.
    #[arg(long, default_value_t = 5.0)]
    poll: f64,
    /// Where bars begin on a first start (RFC 3339); default the service's time at the first
    /// poll. A restarted follow resumes where it stopped (unless --reset).
    #[arg(long)]
    since: Option<DateTime<Utc>>,
    /// Forget this follow's committed watermark and start again as on a first start (at
    /// --since, or the service's time): takes back a watermark that is wrong, such as one
    /// moved by a service's bad clock.
    #[arg(long)]
    reset: bool,
    /// Stop after this many polls, at least 1 (default: run until Ctrl-C). Ends with an
    /// error when the last poll could not move the watermark.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    polls: Option<u64>,
    /// Seconds a commit waits for another writer to release the lake before the poll is
    /// tried again (default 600).
    #[arg(long, value_name = "SECONDS", value_parser = crate::lock_timeout_secs)]
    lock_timeout: Option<Duration>,
    /// Output format: JSON lines by default when stdout is not a terminal, a table when it is.
    #[arg(long, value_enum)]
    format: Option<FollowFormat>,
}

pub fn run(global: &Global, args: FollowArgs) -> anyhow::Result<ExitCode> {
    let mut tokens = args.tokens.clone();
    tokens.extend(args.token.clone());
    tokens.sort();
    tokens.dedup();
    let config = FollowConfig {
        tokens,
        pool: args.pool.clone(),
        wallet: args.wallet.clone(),
        interval_seconds: args.interval,
        since: args.since,
        reset: args.reset,
        lock_timeout: args
            .lock_timeout
            .unwrap_or(FollowConfig::default().lock_timeout),
        ..FollowConfig::default()
    };
    // What to follow is checked before the lake is opened (which would create it).
    config.selection()?;
    if !(args.poll.is_finite() && (MIN_POLL_SECS..=MAX_POLL_SECS).contains(&args.poll)) {
        return Err(dexlake::Error::InvalidArgument {
            argument: "--poll".into(),
            reason: format!(
                "must be {MIN_POLL_SECS} to {MAX_POLL_SECS} seconds, got {}",
                short_number(args.poll)
            ),
        }
        .into());
    }
    let base_url = global
        .base_url
        .clone()
        .context("no service address: pass --base-url or set DEXLAKE_BASE_URL (try `dexlake sim --live` for a local one)")?;
    let client = Client::new(ClientConfig {
        base_url,
        api_key: global.api_key.clone(),
        ..ClientConfig::default()
    })?;
    let lake = Arc::new(
        Lake::open(&global.lake)
            .with_context(|| format!("opening the lake {}", global.lake.display()))?,
    );
    let mut follower = Follower::new(client, lake, config)?;
    let format = args.format.unwrap_or(if std::io::stdout().is_terminal() {
        FollowFormat::Table
    } else {
        FollowFormat::Jsonl
    });
    if let Some(w) = follower.watermark() {
        eprintln!("follow: resuming at {}", w.to_rfc3339());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cancel = CancelToken::new();
    let period = Duration::from_secs_f64(args.poll);
    let result = runtime.block_on(async {
        // Ctrl-C stops the loop after the poll in flight has committed its bars; a second one
        // exits at once (the lake keeps its last commit; the bars of that poll print again
        // on restart).
        let watcher = crate::cancel_on_ctrl_c(
            cancel.clone(),
            "interrupted again: exiting; the bars of the poll in flight print again on restart",
        );
        let mut table = LiveTable::new();
        let mut polls = 0u64;
        let mut failing = 0u32;
        // Why the last poll (or commit) could not move the watermark, while it could not.
        let mut last_failure: Option<anyhow::Error> = None;
        let outcome: anyhow::Result<()> = loop {
            let started = tokio::time::Instant::now();
            // A permanent failure (refused request, service never reached, the lake) ends the
            // follow with its error.
            let poll = match follower.poll(&cancel).await {
                Ok(poll) => poll,
                Err(e) => break Err(e.into()),
            };
            // Printed first, committed second: a kill in between prints these again.
            if let Err(e) = print(&poll.closed, format, &mut table) {
                break Err(e);
            }
            if poll.late > 0 {
                eprintln!(
                    "follow: {} swaps arrived for bars already closed (before {}); they are in the lake, not in the bars printed",
                    poll.late,
                    poll.watermark.map_or("none".into(), |w| w.to_rfc3339())
                );
            }
            let committed = follower.commit(&poll.closed);
            if format == FollowFormat::Table {
                show_state(&follower, &poll, &mut table);
            }
            polls += 1;
            let held = poll.held.clone();
            match (committed, held) {
                (Err(e), _) if e.kind() == dexlake::ErrorKind::Busy => {
                    failing += 1;
                    let wait = backoff(period, failing);
                    eprintln!(
                        "follow: the bars could not be committed ({}); they are kept for the next commit, retrying in {}",
                        dexlake::error::error_chain(&e),
                        seconds(wait)
                    );
                    last_failure = Some(e.into());
                }
                (Err(e), _) => break Err(e.into()),
                (Ok(()), None) => {
                    failing = 0;
                    last_failure = None;
                }
                (Ok(()), Some(_)) if cancel.is_cancelled() => {}
                (Ok(()), Some(reason)) => {
                    // The service did not answer every job (or its clock is not trusted yet):
                    // back off and say so.
                    failing += 1;
                    let wait = backoff(period, failing);
                    eprintln!(
                        "follow: poll incomplete ({}); the watermark stays at {}, retrying in {}",
                        dexlake::error::printable(&reason),
                        follower
                            .watermark()
                            .map_or("none".into(), |w| w.to_rfc3339()),
                        seconds(wait)
                    );
                    last_failure = Some(match poll.into_error() {
                        Some(e) => e.into(),
                        None => anyhow::anyhow!("the last poll could not move the watermark: {reason}"),
                    });
                }
            }
            if cancel.is_cancelled() {
                break Ok(());
            }
            if args.polls.is_some_and(|n| polls >= n) {
                break match last_failure.take() {
                    Some(e) => Err(e.context(format!(
                        "follow: {polls} polls, the last of them incomplete"
                    ))),
                    None => Ok(()),
                };
            }
            tokio::select! {
                _ = tokio::time::sleep_until(started + backoff(period, failing)) => {}
                _ = cancel.cancelled() => break Ok(()),
            }
        };
        watcher.abort();
        outcome
    });
    runtime.shutdown_background();
    result?;
    let late: u64 = follower.late().values().sum();
    if late > 0 {
        eprintln!(
            "follow: {late} swaps arrived after the watermark had passed them; they are in the lake, not in the bars printed"
        );
    }
    Ok(if cancel.is_cancelled() {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// A number for a message: plain when of a usual size, in exponent form otherwise (so
/// `1e-300` is not shown with 300 digits).
fn short_number(x: f64) -> String {
    if x == 0.0 || (1e-3..1e9).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// A wait for a message.
pub(crate) fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// Prints closed bars (nothing when there are none).
fn print(closed: &DataFrame, format: FollowFormat, table: &mut LiveTable) -> anyhow::Result<()> {
    if closed.height() == 0 {
        return Ok(());
    }
    let text = match format {
        FollowFormat::Jsonl => json_lines(closed)?,
        FollowFormat::Table => return table.print(closed),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The watermark and the open bars, the status line on stderr (table format).
fn show_state(follower: &Follower, poll: &dexlake::live::PollReport, table: &mut LiveTable) {
    let open = follower.provisional().map(|f| f.height()).unwrap_or(0);
    table.status(&format!(
        "follow: watermark {}, {} new swaps, {} open bars",
        poll.watermark.map_or("none".into(), |w| w.to_rfc3339()),
        poll.new_events,
        open
    ));
}
