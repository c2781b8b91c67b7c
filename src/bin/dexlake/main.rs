//! The `dexlake` command line: parses flags, calls the library, prints.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use dexlake::error::causes_text;

#[cfg(feature = "sim")]
mod bench_lake_cmd;
mod check_cmd;
pub(crate) mod exit;
mod follow_cmd;
mod lake_cmd;
mod log_cmd;
mod ohlcv_cmd;
mod open_lake;
mod output;
mod parquet_out;
mod pnl_cmd;
mod provenance;
mod search_cmd;
#[cfg(feature = "serve")]
mod serve_cmd;
#[cfg(feature = "serve")]
mod serve_follow;
#[cfg(feature = "sim")]
mod sim_cmd;
mod sql_cmd;
mod status_cmd;
mod sync_cmd;

/// Research DEX market data: sync it into a Parquet lake and analyse it.
#[derive(Parser, Debug)]
#[command(name = "dexlake", version, about, after_long_help = exit::TABLE)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Flags every command understands.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// The lake's root: a folder, or an S3-compatible object store as `s3://bucket/prefix`
    /// (credentials, region and endpoint from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_REGION and AWS_ENDPOINT_URL).
    #[arg(long, global = true, default_value = "./lake", env = "DEXLAKE_LAKE")]
    pub lake: PathBuf,
    /// Base URL of the service.
    #[arg(long, global = true, env = "DEXLAKE_BASE_URL")]
    pub base_url: Option<String>,
    /// API key of the service.
    #[arg(long, global = true, env = "DEXLAKE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

/// Parses a token, pool or wallet address (the library's one rule); clap's error names the
/// flag.
pub use dexlake::query::args::address;

/// The longest `--lock-timeout` accepted: a week.
const MAX_LOCK_TIMEOUT_SECS: f64 = 7.0 * 86_400.0;

/// Parses `--lock-timeout SECONDS`: a number of seconds from 0 to a week (fractions allowed).
pub fn lock_timeout_secs(text: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of seconds, got {text:?}"))?;
    if !(0.0..=MAX_LOCK_TIMEOUT_SECS).contains(&secs) {
        return Err(format!(
            "must be 0 to {MAX_LOCK_TIMEOUT_SECS} seconds (a week), got {text}"
        ));
    }
    std::time::Duration::try_from_secs_f64(secs).map_err(|e| format!("{text}: {e}"))
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the built-in simulator of the service on loopback.
    #[cfg(feature = "sim")]
    Sim(sim_cmd::SimArgs),
    /// Fetch datasets from the service into the lake.
    Sync(sync_cmd::SyncArgs),
    /// Wallet PnL, positions, lots, trading metrics, or the leaderboard, from the lake.
    Pnl(pnl_cmd::PnlArgs),
    /// The 46 token profile metrics of any window, from the lake's trades.
    TokenMetrics(pnl_cmd::TokenMetricsArgs),
    /// Answer a search-profiles request from the lake's profile snapshots.
    Search(search_cmd::SearchArgs),
    /// Print the Arrow schema of one dataset or of all.
    Schema(lake_cmd::SchemaArgs),
    /// What the lake holds and what its syncs fetched, per dataset and target.
    Status(status_cmd::StatusArgs),
    /// The lake's history: one line per commit, newest first (what it added and removed).
    Log(log_cmd::LogArgs),
    /// Print a DuckDB or Spark script defining one view per dataset over exactly the
    /// committed files (a glob of the folders also reads files no commit holds).
    Views(lake_cmd::ViewsArgs),
    /// Check the lake against its manifest.
    Verify(lake_cmd::VerifyArgs),
    /// Data-quality findings: gaps, price jumps, candles against bars, repeated ids, slot
    /// times (exit 0 when clean, 1 with findings, 2 or a failure's own status on error).
    Check(check_cmd::CheckArgs),
    /// Merge small files of each partition into larger ones.
    Compact(lake_cmd::CompactArgs),
    /// Delete the files and log that no version within a retention needs (files replaced by
    /// compaction stay for older versions until then).
    Vacuum(lake_cmd::VacuumArgs),
    /// A SQL query over the lake: every dataset a table of exactly its committed files.
    Sql(sql_cmd::SqlArgs),
    /// OHLCV bars (time, tick, volume or dollar) computed on the lake.
    Ohlcv(ohlcv_cmd::OhlcvArgs),
    /// Keep the lake fresh from the service and print each bar of the followed tokens once it
    /// closes (until Ctrl-C).
    Follow(follow_cmd::FollowArgs),
    /// Price changes and volumes over 5m … 30d computed on the lake.
    PriceStats(ohlcv_cmd::PriceStatsArgs),
    /// Answer the lake's questions as a JSON API over HTTP (read-only; loopback unless given
    /// an access token).
    #[cfg(feature = "serve")]
    Serve(serve_cmd::ServeArgs),
    /// Write the simulator's swaps or trades, or a synthetic EVM price history, straight into a
    /// lake (for benchmarks).
    #[cfg(feature = "sim")]
    #[command(hide = true)]
    BenchLake(bench_lake_cmd::BenchLakeArgs),
    /// Write a small deterministic lake of every dataset (for the interop tests).
    #[command(hide = true)]
    FixtureLake(lake_cmd::FixtureLakeArgs),
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        #[cfg(feature = "sim")]
        Command::Sim(args) => sim_cmd::run(&cli.global, args),
        Command::Sync(args) => sync_cmd::run(&cli.global, args),
        Command::Pnl(args) => pnl_cmd::pnl(&cli.global, args),
        Command::TokenMetrics(args) => pnl_cmd::token_metrics(&cli.global, args),
        Command::Search(args) => search_cmd::run(&cli.global, args),
        Command::Schema(args) => lake_cmd::schema(&cli.global, args),
        Command::Status(args) => status_cmd::status(&cli.global, args),
        Command::Log(args) => log_cmd::run(&cli.global, args),
        Command::Views(args) => lake_cmd::views(&cli.global, args),
        Command::Verify(args) => lake_cmd::verify(&cli.global, args),
        Command::Check(args) => check_cmd::run(&cli.global, args),
        Command::Compact(args) => lake_cmd::compact(&cli.global, args),
        Command::Vacuum(args) => lake_cmd::vacuum(&cli.global, args),
        Command::Sql(args) => sql_cmd::run(&cli.global, args),
        Command::Ohlcv(args) => ohlcv_cmd::ohlcv(&cli.global, args),
        Command::Follow(args) => follow_cmd::run(&cli.global, args),
        Command::PriceStats(args) => ohlcv_cmd::price_stats_cmd(&cli.global, args),
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve_cmd::run(&cli.global, args),
        #[cfg(feature = "sim")]
        Command::BenchLake(args) => bench_lake_cmd::run(&cli.global, args),
        Command::FixtureLake(args) => lake_cmd::fixture_lake(&cli.global, args),
    };
    open_lake::print_transfer_stats();
    match result {
        Ok(code) => code,
        Err(e) => {
            let status = exit::status(&e);
            if status == exit::INTERRUPTED {
                // Stopped as asked: the line says what was kept, it is no error.
                eprintln!("{}", error_text(&e));
            } else {
                eprintln!("error: {}", error_text(&e));
            }
            ExitCode::from(status)
        }
    }
}

/// An error and its causes as one line (the library's one rule, [`causes_text`]).
fn error_text(e: &anyhow::Error) -> String {
    causes_text(e.chain())
}

/// Spawns the watcher of Ctrl-C for a long command (within a tokio runtime): the first Ctrl-C
/// cancels `cancel`, and the command stops after committing what it holds; a second one prints
/// `second` (when not empty) and exits at once with status 130.
pub fn cancel_on_ctrl_c(
    cancel: dexlake::sync::CancelToken,
    second: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                if !second.is_empty() {
                    eprintln!("{second}");
                }
                std::process::exit(exit::INTERRUPTED.into());
            }
        }
    })
}

/// Output piped into a program that stops reading (`dexlake search ... | head`) ends dexlake
/// quietly, as it does any Unix tool, instead of failing on the closed pipe. Rust ignores
/// SIGPIPE by default; this puts back the default action.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first in `main`, before any thread starts; setting a signal's action to
    // its default has no other precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn lock_timeouts_are_seconds_from_zero_to_a_week() {
        assert_eq!(super::lock_timeout_secs("0"), Ok(Duration::ZERO));
        assert_eq!(
            super::lock_timeout_secs("1.5"),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            super::lock_timeout_secs("604800"),
            Ok(Duration::from_secs(604_800))
        );
        for bad in ["-1", "nan", "inf", "1e300", "604801", "", "ten"] {
            assert!(super::lock_timeout_secs(bad).is_err(), "{bad}");
        }
    }
}
