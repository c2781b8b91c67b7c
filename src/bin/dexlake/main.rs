//! The `dexlake` command line: parses flags, calls the library, prints.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod lake_cmd;
mod search_cmd;
#[cfg(feature = "sim")]
mod sim_cmd;
mod sync_cmd;

/// Research DEX market data: sync it into a Parquet lake and analyse it.
#[derive(Parser, Debug)]
#[command(name = "dexlake", version, about)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Flags every command understands.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// The lake's root folder.
    #[arg(long, global = true, default_value = "./lake", env = "DEXLAKE_LAKE")]
    pub lake: PathBuf,
    /// Base URL of the service.
    #[arg(long, global = true, env = "DEXLAKE_BASE_URL")]
    pub base_url: Option<String>,
    /// API key of the service.
    #[arg(long, global = true, env = "DEXLAKE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the built-in simulator of the service on loopback.
    #[cfg(feature = "sim")]
    Sim(sim_cmd::SimArgs),
    /// Fetch datasets from the service into the lake.
    Sync(sync_cmd::SyncArgs),
    /// Answer a search-profiles request from the lake's profile snapshots.
    Search(search_cmd::SearchArgs),
    /// Print the Arrow schema of one dataset or of all.
    Schema(lake_cmd::SchemaArgs),
    /// Check the lake against its manifest.
    Verify(lake_cmd::VerifyArgs),
    /// Merge small files of each partition into larger ones.
    Compact(lake_cmd::CompactArgs),
    /// Write a small deterministic lake of every dataset (for the interop tests).
    #[command(hide = true)]
    FixtureLake(lake_cmd::FixtureLakeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        #[cfg(feature = "sim")]
        Command::Sim(args) => sim_cmd::run(&cli.global, args),
        Command::Sync(args) => sync_cmd::run(&cli.global, args),
        Command::Search(args) => search_cmd::run(&cli.global, args),
        Command::Schema(args) => lake_cmd::schema(&cli.global, args),
        Command::Verify(args) => lake_cmd::verify(&cli.global, args),
        Command::Compact(args) => lake_cmd::compact(&cli.global, args),
        Command::FixtureLake(args) => lake_cmd::fixture_lake(&cli.global, args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
