//! `dexlake serve`: the lake's answers as a JSON API over HTTP (docs/api.md), served by the
//! library's `dexlake::serve` until Ctrl-C. The lake is opened read-only; a non-loopback
//! `--addr` needs an access token, generated and printed at start unless `--token` gives one.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use dexlake::serve::{Access, Server, generate_token};

use crate::Global;
use crate::open_lake::existing_lake;

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
}

pub fn run(global: &Global, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let lake = existing_lake(global)?;
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
    runtime.block_on(async {
        let server = Server::bind(args.addr, lake, access.clone()).await?;
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
        server
            .run(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(ExitCode::SUCCESS)
    })
}
