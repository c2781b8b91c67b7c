//! `dexlake serve --follow`: the library's follower (`dexlake::live::Follower`, as `dexlake
//! follow` runs it) polls in the server's process and publishes each poll to the server's
//! feed (`dexlake::serve::Feed`), which pushes the closed and open bars to the open pages.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use dexlake::api::client::{Client, ClientConfig};
use dexlake::lake::Lake;
use dexlake::live::{FollowConfig, Follower, MAX_POLL_SECS, MIN_POLL_SECS, backoff};
use dexlake::serve::Feed;
use dexlake::sync::CancelToken;

use crate::follow_cmd::seconds;
use crate::{Global, address};

/// The live flags of `dexlake serve`.
#[derive(Args, Debug)]
pub struct LiveArgs {
    /// Tokens to follow (comma-separated): the server polls the service (--base-url) and pushes
    /// their bars to the open token pages as they close (server-sent events on /api/events).
    /// Opens the lake for writing.
    #[arg(long, value_delimiter = ',', value_parser = address)]
    pub follow: Vec<String>,
    /// Width of the followed bars, seconds.
    #[arg(long, default_value_t = 60, requires = "follow")]
    pub interval: i64,
    /// Seconds between polls (the next poll starts this long after the last one started);
    /// 0.05 to 86400.
    #[arg(long, default_value_t = 5.0, requires = "follow")]
    pub poll: f64,
}

/// A follow ready to run: its follower, the feed the server serves, the period of its polls.
pub struct Live {
    follower: Follower,
    pub feed: Feed,
    period: Duration,
}

/// Prepares the follow `args` asks for (`None` without `--follow`): the lake opened for
/// writing, the follower resumed from the lake's state, the feed at its watermark.
pub fn prepare(global: &Global, args: &LiveArgs) -> anyhow::Result<Option<Live>> {
    if args.follow.is_empty() {
        return Ok(None);
    }
    let mut tokens = args.follow.clone();
    tokens.sort();
    tokens.dedup();
    if !(args.poll.is_finite() && (MIN_POLL_SECS..=MAX_POLL_SECS).contains(&args.poll)) {
        return Err(dexlake::Error::InvalidArgument {
            argument: "--poll".into(),
            reason: format!(
                "must be {MIN_POLL_SECS} to {MAX_POLL_SECS} seconds, got {}",
                args.poll
            ),
        }
        .into());
    }
    let config = FollowConfig {
        tokens: tokens.clone(),
        interval_seconds: args.interval,
        ..FollowConfig::default()
    };
    config.selection()?;
    let base_url = global.base_url.clone().context(
        "--follow needs the service: pass --base-url or set DEXLAKE_BASE_URL (try `dexlake sim --live` for a local one)",
    )?;
    let client = Client::new(ClientConfig {
        base_url,
        api_key: global.api_key.clone(),
        ..ClientConfig::default()
    })?;
    let lake = Arc::new(
        Lake::open(&global.lake)
            .with_context(|| format!("opening the lake {}", global.lake.display()))?,
    );
    let follower = Follower::new(client, lake, config)?;
    let feed = Feed::new(&tokens, args.interval, follower.watermark())?;
    Ok(Some(Live {
        follower,
        feed,
        period: Duration::from_secs_f64(args.poll),
    }))
}

impl Live {
    /// Polls until `cancel`: each poll's bars are committed, then published. A permanent
    /// failure ends the follow (and the server) with its error; a held poll or a busy lake is
    /// said on stderr and tried again after the wait `dexlake follow` takes
    /// ([`dexlake::live::backoff`]: the period, doubled after each failed poll in a row).
    pub async fn run(mut self, cancel: CancelToken) -> anyhow::Result<()> {
        let mut failing = 0u32;
        loop {
            let started = tokio::time::Instant::now();
            let poll = self.follower.poll(&cancel).await?;
            let committed = match self.follower.commit(&poll.closed) {
                Err(e) if e.kind() != dexlake::ErrorKind::Busy => return Err(e.into()),
                committed => committed,
            };
            self.feed.publish(
                &poll.closed,
                &self.follower.provisional()?,
                self.follower.watermark(),
            )?;
            match (committed, &poll.held) {
                (Err(e), _) => {
                    failing += 1;
                    eprintln!(
                        "serve: the bars could not be committed ({}); they are kept for the next commit, retrying in {}",
                        dexlake::error::error_chain(&e),
                        seconds(backoff(self.period, failing))
                    );
                }
                (Ok(()), None) => failing = 0,
                (Ok(()), Some(_)) if cancel.is_cancelled() => return Ok(()),
                (Ok(()), Some(reason)) => {
                    failing += 1;
                    eprintln!(
                        "serve: poll incomplete ({}); the watermark stays at {}, retrying in {}",
                        dexlake::error::printable(reason),
                        self.follower
                            .watermark()
                            .map_or("none".into(), |w| w.to_rfc3339()),
                        seconds(backoff(self.period, failing))
                    );
                }
            }
            tokio::select! {
                _ = tokio::time::sleep_until(started + backoff(self.period, failing)) => {}
                _ = cancel.cancelled() => return Ok(()),
            }
        }
    }
}
