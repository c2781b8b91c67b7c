//! `dexlake serve`: the lake's pages and its answers as a JSON API over HTTP (docs/api.md),
//! served by the library's `dexlake::serve` until Ctrl-C. The lake is opened read-only (pinned
//! with `--as-of`); with `--follow`, the follower polls in the same process and writes it
//! (`serve_follow.rs`). A non-loopback `--addr` needs an access token, generated and printed
//! at start unless `--token` gives one.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use dexlake::serve::{Access, Server, generate_token};
use dexlake::sync::CancelToken;

use crate::Global;
use crate::open_lake::{AsOfArg, reading_lake};
use crate::serve_follow::{self, LiveArgs};

/// Arguments of `dexlake serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The address to listen on. A loopback address (the default) serves this machine only;
    /// any other needs an access token (generated and printed unless --token gives one).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub addr: SocketAddr,
    /// The access token every request must carry (`Authorization: Bearer TOKEN` or
    /// `access_token=TOKEN`); on a loopback address too when given.
    #[arg(long, env = "DEXLAKE_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

pub fn run(global: &Global, args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.as_of.as_of.is_some() && !args.live.follow.is_empty() {
        crate::exit::usage_bail!(
            "--as-of pins the lake to a version; --follow writes new ones: give one of them"
        );
    }
    // The follow's lake handle writes; the server's reads only.
    let live = serve_follow::prepare(global, &args.live)?;
    let lake = reading_lake(global, &args.as_of)?;
    // A token given is used; one is made for a non-loopback address without one.
    let (access, generated) = match args.token {
        Some(token) => (Access::Token(token), false),
        None if args.addr.ip().is_loopback() => (Access::Open, false),
        None => (Access::Token(generate_token()), true),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let cancel = CancelToken::new();
    let result = runtime.block_on(async {
        let mut server = Server::bind(args.addr, lake, access.clone()).await?;
        if let Some(live) = &live {
            server = server.with_feed(live.feed.clone());
        }
        let addr = server.local_addr()?;
        // The first line is the contract with scripts and tests, written in one piece.
        let mut banner = format!("listening on http://{addr}/api/\n");
        if let (Access::Token(token), true) = (&access, generated) {
            banner.push_str(&format!(
                "access token (every request carries it as `Authorization: Bearer TOKEN` or \
                 ?access_token=TOKEN):\n    {token}\n    http://{addr}/api/status?access_token={token}\n"
            ));
        }
        let mut out = std::io::stdout().lock();
        out.write_all(banner.as_bytes())
            .and_then(|()| out.flush())
            .context("writing to stdout")?;
        drop(out);
        let watcher = crate::cancel_on_ctrl_c(cancel.clone(), "");
        let stop = cancel.clone();
        let serving = server.run(async move { stop.cancelled().await });
        let outcome: anyhow::Result<()> = match live {
            None => serving.await.map_err(Into::into),
            Some(live) => {
                let following = async {
                    let outcome = live.run(cancel.clone()).await;
                    // A follow that failed stops the server too.
                    cancel.cancel();
                    outcome
                };
                let (served, followed) = tokio::join!(serving, following);
                followed.and(served.map_err(Into::into))
            }
        };
        watcher.abort();
        outcome
    });
    runtime.shutdown_background();
    result?;
    Ok(ExitCode::SUCCESS)
}
