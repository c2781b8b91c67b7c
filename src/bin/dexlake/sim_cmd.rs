//! `dexlake sim`: serve the built-in simulator of the service, or print its market.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use dexlake::sim::{LiveConfig, Scale, SimConfig, Simulator, SyntheticMarket};

use crate::Global;

/// Arguments of `dexlake sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    /// Seed of the synthetic market.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Size of the market: tiny, small, medium, large or xlarge.
    #[arg(long, default_value = "tiny")]
    scale: Scale,
    /// Path segment of the non-EVM family.
    #[arg(long, default_value = "altchain")]
    altchain_segment: String,
    /// Requests per second allowed per key (429 with Retry-After beyond it).
    #[arg(long)]
    rate_limit: Option<f64>,
    /// Probability of answering a request with 500.
    #[arg(long, default_value_t = 0.0)]
    fail_rate: f64,
    /// Probability of answering a request with 429.
    #[arg(long, default_value_t = 0.0)]
    throttle_rate: f64,
    /// Seed of the injected faults (default: derived from --seed).
    #[arg(long)]
    fault_seed: Option<u64>,
    /// Print the market (tokens, pools, wallets per chain, and "now") as JSON and exit.
    #[arg(long)]
    catalog: bool,
    /// Keep trading after the market's fixed "now": a clock starts there and the service
    /// answers at it (GET /sim/catalog tells its "now").
    #[arg(long)]
    live: bool,
    /// Simulated seconds per real second of the live clock.
    #[arg(long, default_value_t = 1.0, requires = "live")]
    speed: f64,
    /// Days of trading generated after the fixed "now" (the clock goes on after them).
    #[arg(long, default_value_t = 30, requires = "live")]
    horizon_days: u32,
}

pub fn run(_global: &Global, args: SimArgs) -> anyhow::Result<ExitCode> {
    let live = args.live.then_some(LiveConfig {
        speed: args.speed,
        manual: false,
        horizon_days: args.horizon_days,
    });
    if let Some(live) = &live {
        live.validate().context("--speed and --horizon-days")?;
    }
    if args.catalog {
        // A live market's catalog is taken at the start of its clock, the fixed "now".
        let market = match &live {
            Some(live) => SyntheticMarket::generate_live(args.seed, args.scale, live.horizon_days)
                .context("--live")?,
            None => SyntheticMarket::generate(args.seed, args.scale),
        };
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &market.catalog()).context("writing the catalog")?;
        writeln!(out).context("writing the catalog")?;
        out.flush().context("writing the catalog")?;
        return Ok(ExitCode::SUCCESS);
    }
    let config = SimConfig {
        addr: args.addr,
        seed: args.seed,
        scale: args.scale,
        altchain_segment: args.altchain_segment,
        rate_limit: args.rate_limit,
        fail_rate: args.fail_rate,
        throttle_rate: args.throttle_rate,
        fault_seed: args.fault_seed,
        live,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let sim = Simulator::start(config)
            .await
            .context("starting the simulator")?;
        {
            // The first line is the contract with scripts and tests. The banner goes out in one
            // write, so a reader that takes the first line and closes the pipe has all of it.
            let mut banner = format!("listening on {}\n", sim.base_url());
            let market = sim.market();
            if let Some(until) = market.trading_until() {
                banner.push_str(&format!(
                    "live: the clock starts at {} and runs {} simulated seconds per second; \
                     the market trades until {}; GET {}/sim/catalog tells its now\n",
                    market
                        .now()
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    dexlake::error::number(sim.speed()),
                    until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    sim.base_url(),
                ));
            }
            let mut out = std::io::stdout().lock();
            out.write_all(banner.as_bytes())
                .and_then(|()| out.flush())
                .context("writing to stdout")?;
        }
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        sim.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
