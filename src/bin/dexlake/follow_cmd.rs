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
use dexlake::live::{FollowConfig, Follower};
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
    /// Seconds between polls (the next poll starts this long after the last one started).
    #[arg(long, default_value_t = 5.0)]
    poll: f64,
    /// Where bars begin on a first start (RFC 3339); default the service's time at the first
    /// poll. A restarted follow resumes where it stopped.
    #[arg(long)]
    since: Option<DateTime<Utc>>,
    /// Stop after this many polls (default: run until Ctrl-C).
    #[arg(long)]
    polls: Option<u64>,
    /// Output format: JSON lines by default when stdout is not a terminal, a table when it is.
    #[arg(long, value_enum)]
    format: Option<FollowFormat>,
}

/// Longest `--poll` accepted: a day.
const MAX_POLL_SECS: f64 = 86_400.0;

pub fn run(global: &Global, args: FollowArgs) -> anyhow::Result<ExitCode> {
    let mut tokens = args.tokens.clone();
    tokens.extend(args.token.clone());
    tokens.sort();
    tokens.dedup();
    anyhow::ensure!(
        !tokens.is_empty() || args.pool.is_some(),
        "name what to follow: --token T, --tokens A,B or --pool P"
    );
    anyhow::ensure!(
        args.poll.is_finite() && args.poll > 0.0 && args.poll <= MAX_POLL_SECS,
        "--poll must be more than 0 and at most {MAX_POLL_SECS} seconds, got {}",
        args.poll
    );
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
    let config = FollowConfig {
        tokens,
        pool: args.pool.clone(),
        wallet: args.wallet.clone(),
        interval_seconds: args.interval,
        since: args.since,
        ..FollowConfig::default()
    };
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
        let outcome: anyhow::Result<()> = loop {
            let started = tokio::time::Instant::now();
            let poll = match follower.poll(&cancel).await {
                Ok(poll) => poll,
                Err(e) => break Err(e.into()),
            };
            // Printed first, committed second: a kill in between prints these again.
            if let Err(e) = print(&poll.closed, format, &mut table) {
                break Err(e);
            }
            if let Err(e) = follower.commit(&poll.closed) {
                break Err(e.into());
            }
            if format == FollowFormat::Table {
                show_state(&follower, &poll, &mut table);
            }
            if poll.advanced {
                failing = 0;
            } else if !cancel.is_cancelled() {
                // The service did not answer every job: back off (up to a minute) and say so.
                failing += 1;
                let failed: Vec<String> = poll
                    .sync
                    .jobs
                    .iter()
                    .filter_map(|j| j.outcome.error().map(|e| format!("{}: {e}", j.job)))
                    .collect();
                table.end_status();
                eprintln!(
                    "follow: poll incomplete ({}); the watermark stays at {}, retrying",
                    if failed.is_empty() {
                        "no answer".to_owned()
                    } else {
                        failed.join("; ")
                    },
                    follower
                        .watermark()
                        .map_or("none".into(), |w| w.to_rfc3339())
                );
            }
            polls += 1;
            if cancel.is_cancelled() || args.polls.is_some_and(|n| polls >= n) {
                break Ok(());
            }
            // After incomplete polls the wait doubles, up to a minute (or the period).
            let wait = if failing == 0 {
                period
            } else {
                (period * 2u32.pow(failing.min(6)))
                    .min(Duration::from_secs(60))
                    .max(period)
            };
            tokio::select! {
                _ = tokio::time::sleep_until(started + wait) => {}
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
