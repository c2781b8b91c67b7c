//! `dexlake sync`: fetch datasets into the lake, one job from flags or many from a plan file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use dexlake::api::client::{Client, ClientConfig};
use dexlake::api::retry::{MAX_CONCURRENCY, RateLimit};
use dexlake::error::{error_chain, escaped_in_full};
use dexlake::lake::Lake;
use dexlake::sync::{
    CancelToken, Job, JobOutcome, JobReport, Plan, ProgressBars, SyncConfig, SyncReport, Syncer,
    read_search_request,
};

use crate::Global;
use crate::exit::{self, UsageError, usage_bail};

/// Arguments of `dexlake sync`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SyncArgs {
    #[command(subcommand)]
    what: Option<What>,
    /// Run every job of a TOML plan file.
    #[arg(long)]
    plan: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
}

/// Flags shared by every form of `dexlake sync`.
#[derive(Args, Debug, Clone)]
struct RunFlags {
    /// Print what would be fetched and an estimate of the requests, then stop.
    #[arg(long, global = true)]
    dry_run: bool,
    /// Requests per second for the whole run (a plan's `rps` wins when this is not given).
    #[arg(long, global = true)]
    rps: Option<f64>,
    /// Requests in flight at once.
    #[arg(long, global = true)]
    concurrency: Option<usize>,
    /// Seconds of the newest candles and price history always fetched again.
    #[arg(long, global = true, default_value_t = 3600)]
    recent_window: u64,
    /// Path segment of the non-EVM chain family.
    #[arg(long, global = true, default_value = "altchain")]
    altchain_segment: String,
    /// Seconds a commit waits for another writer to release the lake, keeping the rows it
    /// holds, before the jobs whose rows they are fail (default 600; after Ctrl-C at most 10
    /// more).
    #[arg(long, global = true, value_name = "SECONDS", value_parser = crate::lock_timeout_secs)]
    lock_timeout: Option<Duration>,
    /// Commit the fetched rows once this many are waiting (default 65536).
    #[arg(long, global = true, value_name = "ROWS")]
    commit_rows: Option<usize>,
    /// Commit the fetched rows once the oldest has waited this long (default 30).
    #[arg(long, global = true, value_name = "SECONDS", value_parser = crate::lock_timeout_secs)]
    commit_interval: Option<Duration>,
    /// Do not compact the partitions the run wrote at its end.
    #[arg(long, global = true)]
    no_compact: bool,
    /// Write the per-job table to FILE: JSON when it ends in `.json`, CSV otherwise.
    #[arg(long, global = true, value_name = "FILE")]
    jobs_report: Option<PathBuf>,
    /// Print the per-job table however many jobs the plan has (by default only plans of at
    /// most 20 jobs get it; larger ones get the 10 largest jobs).
    #[arg(long, global = true)]
    verbose: bool,
    /// Print where the run's wall time went: fetching, committing after the fetching ended,
    /// the compaction at the end; and the small files the commits merged.
    #[arg(long, global = true)]
    timings: bool,
    /// Commits add their own files only, and the compaction at the end merges every file not
    /// yet full (by default commits merge the small files of the days they write, and the end
    /// compacts only what is still small).
    #[arg(long, global = true)]
    no_merge_small_files: bool,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Altchain swaps of a token, wallet or pool.
    Swaps {
        #[command(flatten)]
        target: SwapTarget,
    },
    /// Altchain trades of a token or wallet.
    Trades {
        #[command(flatten)]
        target: TradeTarget,
    },
    /// Altchain candles of a token or pool.
    Candles {
        #[command(flatten)]
        target: CandleTarget,
        /// Seconds per candle.
        #[arg(long)]
        interval: i64,
        /// Start (RFC 3339).
        #[arg(long)]
        from: DateTime<Utc>,
        /// End (RFC 3339); now when omitted.
        #[arg(long)]
        to: Option<DateTime<Utc>>,
    },
    /// EVM price history of tokens or pools.
    PriceHistory {
        /// Numeric EVM chain id.
        #[arg(long)]
        chain_id: i64,
        #[command(flatten)]
        addresses: Addresses,
        /// Seconds between points.
        #[arg(long)]
        interval: i64,
        /// Start (RFC 3339).
        #[arg(long)]
        from: DateTime<Utc>,
        /// End (RFC 3339); now when omitted.
        #[arg(long)]
        to: Option<DateTime<Utc>>,
    },
    /// A snapshot of latest prices.
    Prices {
        #[command(flatten)]
        chain: ChainSel,
        #[command(flatten)]
        addresses: Addresses,
    },
    /// A snapshot of price stats.
    PriceStats {
        #[command(flatten)]
        chain: ChainSel,
        #[command(flatten)]
        addresses: Addresses,
    },
    /// Token profiles: EVM get-profile per token, or every page of an altchain search.
    Profiles {
        #[command(flatten)]
        chain: ChainSel,
        /// Token addresses (EVM), comma-separated.
        #[arg(long, value_delimiter = ',')]
        tokens: Vec<String>,
        /// Search-profiles body (altchain), a JSON file.
        #[arg(long)]
        request: Option<PathBuf>,
    },
    /// Altchain wallet portfolios.
    Portfolios {
        /// Wallet addresses, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        wallets: Vec<String>,
    },
}

#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct SwapTarget {
    /// Token address.
    #[arg(long)]
    token: Option<String>,
    /// Wallet address.
    #[arg(long)]
    wallet: Option<String>,
    /// Pool address.
    #[arg(long)]
    pool: Option<String>,
}

#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct TradeTarget {
    /// Token address.
    #[arg(long)]
    token: Option<String>,
    /// Wallet address.
    #[arg(long)]
    wallet: Option<String>,
}

#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct CandleTarget {
    /// Token address.
    #[arg(long)]
    token: Option<String>,
    /// Pool address.
    #[arg(long)]
    pool: Option<String>,
}

#[derive(Args, Debug)]
#[group(required = true, multiple = true)]
struct Addresses {
    /// Token addresses, comma-separated.
    #[arg(long, value_delimiter = ',')]
    tokens: Vec<String>,
    /// Pool addresses, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pools: Vec<String>,
}

#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct ChainSel {
    /// Numeric EVM chain id.
    #[arg(long)]
    chain_id: Option<i64>,
    /// The non-EVM chain family.
    #[arg(long)]
    altchain: bool,
}

fn job_from(what: What) -> anyhow::Result<Job> {
    Ok(match what {
        What::Swaps { target } => Job::Swaps {
            token: target.token,
            wallet: target.wallet,
            pool: target.pool,
        },
        What::Trades { target } => Job::Trades {
            token: target.token,
            wallet: target.wallet,
        },
        What::Candles {
            target,
            interval,
            from,
            to,
        } => Job::Candles {
            token: target.token,
            pool: target.pool,
            interval,
            from,
            to,
        },
        What::PriceHistory {
            chain_id,
            addresses,
            interval,
            from,
            to,
        } => Job::PriceHistory {
            chain_id,
            tokens: addresses.tokens,
            pools: addresses.pools,
            interval,
            from,
            to,
        },
        What::Prices { chain, addresses } => Job::Prices {
            chain_id: chain.chain_id,
            tokens: addresses.tokens,
            pools: addresses.pools,
        },
        What::PriceStats { chain, addresses } => Job::PriceStats {
            chain_id: chain.chain_id,
            tokens: addresses.tokens,
            pools: addresses.pools,
        },
        What::Profiles {
            chain,
            tokens,
            request,
        } => match (chain.chain_id, request) {
            (Some(chain_id), None) => Job::EvmProfiles { chain_id, tokens },
            (None, Some(path)) => Job::AltProfiles {
                request: read_search_request(&path)?,
            },
            (Some(_), Some(_)) => {
                usage_bail!("--request is for --altchain; EVM profiles take --tokens")
            }
            (None, None) => {
                usage_bail!("--altchain profiles need --request FILE.json (a search-profiles body)")
            }
        },
        What::Portfolios { wallets } => Job::Portfolios { wallets },
    })
}

/// Longest `--recent-window` accepted (366 days).
const MAX_RECENT_WINDOW_SECS: u64 = 366 * 86_400;

/// Everything a sync run needs, checked, before anything touches the network or the lake.
#[derive(Debug)]
struct Prepared {
    jobs: Vec<Job>,
    client: ClientConfig,
    sync: SyncConfig,
    dry_run: bool,
    jobs_report: Option<PathBuf>,
    verbose: bool,
    timings: bool,
}

/// Largest `--commit-rows` accepted.
const MAX_COMMIT_ROWS: usize = 1 << 24;

/// Turns the flags (and the plan file) into checked jobs and configurations; every number is
/// validated here with a clear message.
fn prepare(global: &Global, args: SyncArgs) -> anyhow::Result<Prepared> {
    let (jobs, plan_rps, plan_concurrency) = match (args.what, args.plan) {
        (Some(what), None) => (vec![job_from(what)?], None, None),
        (None, Some(path)) => {
            let plan = Plan::from_file(&path)
                .with_context(|| format!("reading plan {}", path.display()))?;
            (plan.jobs, plan.rps, plan.concurrency)
        }
        _ => {
            usage_bail!(
                "say what to sync (e.g. `dexlake sync swaps --token T`) or give --plan FILE.toml"
            )
        }
    };
    for job in &jobs {
        job.validate()?;
    }
    let flags = args.run;
    let base_url = global
        .base_url
        .clone()
        .ok_or_else(|| UsageError("no service address: pass --base-url or set DEXLAKE_BASE_URL (try `dexlake sim` for a local one)".into()))?;
    let mut config = ClientConfig {
        base_url,
        api_key: global.api_key.clone(),
        ..ClientConfig::default()
    };
    config.altchain_segment = flags.altchain_segment.clone();
    if let Some(rps) = flags.rps.or(plan_rps) {
        config.rate_limit = Some(RateLimit::per_second(rps).context("--rps")?);
    }
    if let Some(c) = flags.concurrency.or(plan_concurrency) {
        if !(1..=MAX_CONCURRENCY).contains(&c) {
            usage_bail!("--concurrency must be 1 to {MAX_CONCURRENCY}, got {c}");
        }
        config.max_concurrency = c;
    }
    if flags.recent_window > MAX_RECENT_WINDOW_SECS {
        usage_bail!(
            "--recent-window must be at most {MAX_RECENT_WINDOW_SECS} seconds, got {}",
            flags.recent_window
        );
    }
    if let Some(rows) = flags.commit_rows
        && !(1..=MAX_COMMIT_ROWS).contains(&rows)
    {
        usage_bail!("--commit-rows must be 1 to {MAX_COMMIT_ROWS}, got {rows}");
    }
    let defaults = SyncConfig::default();
    let sync = SyncConfig {
        recent_window: Duration::from_secs(flags.recent_window),
        lock_timeout: flags.lock_timeout.unwrap_or(defaults.lock_timeout),
        commit_rows: flags.commit_rows.unwrap_or(defaults.commit_rows),
        commit_interval: flags.commit_interval.unwrap_or(defaults.commit_interval),
        compact: !flags.no_compact,
        merge_small_files: !flags.no_merge_small_files,
        ..defaults
    };
    Ok(Prepared {
        jobs,
        client: config,
        sync,
        dry_run: flags.dry_run,
        jobs_report: flags.jobs_report,
        verbose: flags.verbose,
        timings: flags.timings,
    })
}

/// Runs `dexlake sync`.
pub fn run(global: &Global, args: SyncArgs) -> anyhow::Result<ExitCode> {
    let Prepared {
        jobs,
        client,
        sync,
        dry_run,
        jobs_report,
        verbose,
        timings,
    } = prepare(global, args)?;
    let client = Client::new(client)?;
    // The lake keeps its default lock timeout: a sync's commits wait `sync.lock_timeout`, and
    // after Ctrl-C no longer than the lake's own timeout.
    let lake = Arc::new(Lake::open(&global.lake)?);
    let sync = Syncer::new(client, lake, sync);

    if dry_run {
        let mut total = Some(0u64);
        for job in &jobs {
            let e = sync.estimate(job)?;
            let n = e.requests.map_or_else(|| "?".to_owned(), |n| n.to_string());
            println!(
                "{:<60} requests: {:>6}   {}",
                escaped_in_full(&e.job),
                n,
                e.note
            );
            total = total.zip(e.requests).map(|(a, b)| a + b);
        }
        match total {
            Some(t) => println!("total requests: {t}"),
            None => println!("total requests: unknown until the first pages arrive"),
        }
        return Ok(ExitCode::SUCCESS);
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cancel = CancelToken::new();
    let observer = ProgressBars::new(jobs.len());
    let report = runtime.block_on(async {
        // The first Ctrl-C stops the run: jobs not started are not started, running jobs stop
        // at their next request and the fetched rows are committed once. A second one exits at
        // once; the lake keeps its last commit.
        let watcher = crate::cancel_on_ctrl_c(
            cancel.clone(),
            "interrupted again: exiting without committing the fetched rows",
        );
        let report = sync.run_with(&jobs, &observer, &cancel).await;
        watcher.abort();
        report
    });
    observer.finish();
    // Blocking tasks still running (none once the run returned) are not waited for.
    runtime.shutdown_background();

    print_summary(&report, verbose, timings);
    if let Some(path) = &jobs_report {
        write_jobs_report(path, &report)
            .with_context(|| format!("writing the jobs report {}", path.display()))?;
        println!("  per-job report: {}", path.display());
    }
    let mut interrupted = 0usize;
    let mut not_started = 0usize;
    // The exit status of the failed jobs: their kind's when they share one, else 1.
    let mut failed: Option<u8> = None;
    for j in &report.jobs {
        match &j.outcome {
            JobOutcome::Done => {}
            JobOutcome::Interrupted => interrupted += 1,
            JobOutcome::NotStarted => not_started += 1,
            JobOutcome::Failed(error) => {
                eprintln!("failed: {}", escaped_in_full(&error_chain(error.as_ref())));
                let status = exit::status_of(Some(error.kind()));
                failed = Some(failed.map_or(status, |s| if s == status { s } else { 1 }));
            }
        }
    }
    if interrupted + not_started > 0 {
        let stopped = dexlake::Error::Interrupted {
            what: format!(
                "{interrupted} job{} stopped (progress committed), {not_started} not started; run again to resume",
                if interrupted == 1 { "" } else { "s" }
            ),
        };
        if failed.is_none() {
            // Printed by `main` as it is, and exits with status 130.
            return Err(stopped.into());
        }
        eprintln!("{stopped}");
    }
    Ok(failed.map_or(ExitCode::SUCCESS, ExitCode::from))
}

/// Plans of more jobs than this get totals and the largest jobs instead of the per-job table
/// (unless `--verbose`).
const FULL_TABLE_UP_TO: usize = 20;

/// Jobs listed by rows added in the summary of a large plan.
const LARGEST_JOBS: usize = 10;

/// Prints the run's totals, its commits and compaction, with `timings` where the wall time went,
/// and the per-job table (or, for plans of more than [`FULL_TABLE_UP_TO`] jobs without
/// `verbose`, the [`LARGEST_JOBS`] largest).
fn print_summary(report: &SyncReport, verbose: bool, timings: bool) {
    println!("sync finished in {:.1?}", report.elapsed);
    for (dataset, rows) in report.rows_added() {
        println!("  {dataset:<16} {rows:>10} rows added");
    }
    println!(
        "  requests: {} by jobs, {} sent ({} retries)",
        report.requests(),
        report.http_requests,
        report.retries
    );
    let count = |f: fn(&JobOutcome) -> bool| report.jobs.iter().filter(|j| f(&j.outcome)).count();
    println!(
        "  jobs: {} done, {} interrupted, {} not started, {} failed (of {})",
        count(|o| *o == JobOutcome::Done),
        count(|o| *o == JobOutcome::Interrupted),
        count(|o| *o == JobOutcome::NotStarted),
        count(|o| matches!(o, JobOutcome::Failed(_))),
        report.jobs.len()
    );
    println!(
        "  commits: {} ({} files into {} partitions, {:.1?} committing)",
        report.commits, report.files_added, report.partitions_written, report.commit_time
    );
    if let Some(c) = &report.compaction {
        match &c.result {
            Ok(r) => println!(
                "  compaction: {} of {} partitions, {} files into {} ({:.1?})",
                r.partitions, c.partitions, r.files_removed, r.files_added, c.elapsed
            ),
            Err(e) => println!(
                "  compaction failed (the synced rows are committed; `dexlake compact` retries): {}",
                escaped_in_full(&error_chain(e.as_ref()))
            ),
        }
    }
    if timings {
        print_timings(report);
    }
    let row = |j: &JobReport| {
        println!(
            "  {:<60} {:>9} rows added {:>6} requests",
            escaped_in_full(&j.job),
            j.rows_added,
            j.requests
        );
    };
    if verbose || report.jobs.len() <= FULL_TABLE_UP_TO {
        report.jobs.iter().for_each(row);
    } else {
        let mut largest: Vec<&JobReport> = report.jobs.iter().collect();
        largest.sort_by_key(|j| std::cmp::Reverse(j.rows_added));
        println!(
            "  the {LARGEST_JOBS} largest of {} jobs (--verbose or --jobs-report FILE for all):",
            report.jobs.len()
        );
        largest.into_iter().take(LARGEST_JOBS).for_each(row);
    }
}

/// Where the run's wall time went (`--timings`): the fetching (commits running beside it), the
/// commits after the fetching ended, the compaction; and the files the commits merged.
fn print_timings(report: &SyncReport) {
    let tail = report.commits_elapsed.saturating_sub(report.fetch_elapsed);
    let compaction = report
        .compaction
        .as_ref()
        .map_or(Duration::ZERO, |c| c.elapsed);
    println!(
        "  timings: fetching {:.1?}, then committing {:.1?}, then compaction {:.1?} (of {:.1?}); {:.1?} committing in all",
        report.fetch_elapsed, tail, compaction, report.elapsed, report.commit_time
    );
    println!("  merged in commits: {} small files", report.files_merged);
}

/// One line of the per-job report.
#[derive(serde::Serialize)]
struct JobLine<'a> {
    index: usize,
    job: &'a str,
    dataset: &'a str,
    outcome: &'static str,
    rows_added: u64,
    rows_fetched: u64,
    /// Records refused as dated far past the answer that carried them.
    rows_refused: u64,
    requests: u64,
    error: String,
}

/// Writes every job's report to `path`: a JSON array when it ends in `.json`, CSV otherwise.
fn write_jobs_report(path: &std::path::Path, report: &SyncReport) -> anyhow::Result<()> {
    let lines: Vec<JobLine<'_>> = report
        .jobs
        .iter()
        .enumerate()
        .map(|(index, j)| JobLine {
            index,
            job: &j.job,
            dataset: j.dataset.name(),
            outcome: j.outcome.name(),
            rows_added: j.rows_added,
            rows_fetched: j.rows_fetched,
            rows_refused: j.rows_refused,
            requests: j.requests,
            error: j
                .outcome
                .error()
                .map(|e| error_chain(e))
                .unwrap_or_default(),
        })
        .collect();
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let text = if json {
        serde_json::to_string_pretty(&lines)?
    } else {
        let mut out = String::from(
            "index,job,dataset,outcome,rows_added,rows_fetched,rows_refused,requests,error\n",
        );
        for l in &lines {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                l.index,
                csv_field(l.job),
                l.dataset,
                l.outcome,
                l.rows_added,
                l.rows_fetched,
                l.rows_refused,
                l.requests,
                csv_field(&l.error)
            ));
        }
        out
    };
    std::fs::write(path, text)?;
    Ok(())
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proptest::prelude::*;

    use super::*;
    use crate::{Cli, Command};
    use dexlake::sync::MAX_BARS_PER_JOB;
    use dexlake::sync::ranges::Range;

    /// Parses a command line and prepares the run, as `dexlake sync` does before it touches
    /// the network or the lake; the client configuration is checked too.
    fn prepare_line(args: &[String]) -> anyhow::Result<Prepared> {
        let cli = Cli::try_parse_from(args)?;
        let Command::Sync(sync) = cli.command else {
            panic!("a sync command line");
        };
        let prepared = prepare(&cli.global, sync)?;
        Client::new(prepared.client.clone())?;
        Ok(prepared)
    }

    fn line(extra: &[&str]) -> Vec<String> {
        ["dexlake", "--base-url", "http://127.0.0.1:9", "sync"]
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect()
    }

    #[test]
    fn out_of_range_numbers_are_clear_errors() {
        let candles = |interval: &str| {
            line(&[
                "candles",
                "--token",
                "T",
                &format!("--interval={interval}"),
                "--from",
                "2025-01-01T00:00:00Z",
                "--dry-run",
            ])
        };
        for (args, expected) in [
            (candles("9223372036854775807"), "interval must be 1 to"),
            (candles("0"), "interval must be 1 to"),
            (candles("-60"), "interval must be 1 to"),
            (candles("1"), "more than the"),
            (
                line(&["swaps", "--token", "T", "--rps", "1e-20"]),
                "requests per second must be",
            ),
            (
                line(&["swaps", "--token", "T", "--rps", "NaN"]),
                "requests per second must be",
            ),
            (
                line(&[
                    "swaps",
                    "--token",
                    "T",
                    "--concurrency",
                    "18446744073709551615",
                ]),
                "--concurrency must be 1 to",
            ),
            (
                line(&[
                    "swaps",
                    "--token",
                    "T",
                    "--recent-window",
                    "18446744073709551615",
                ]),
                "--recent-window must be at most",
            ),
            (
                line(&["prices", "--chain-id=-1", "--tokens", "A"]),
                "chain_id must be a positive",
            ),
        ] {
            let err = prepare_line(&args).expect_err("refused");
            assert!(format!("{err:#}").contains(expected), "{args:?}: {err:#}");
        }
        let ok = prepare_line(&candles("60")).expect("a sane line");
        assert!(ok.dry_run);
    }

    /// A number as a user might type it: any integer or float, or something odd.
    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:e}")),
            any::<f64>().prop_map(|f| f.to_string()),
            "[-+0-9.eE]{0,12}",
            prop_oneof![
                Just("inf"),
                Just("-inf"),
                Just("NaN"),
                Just("1e-20"),
                Just("")
            ]
            .prop_map(str::to_owned),
        ]
    }

    /// A date-time as a user might type it, from far past to far future.
    fn time() -> impl Strategy<Value = String> {
        prop_oneof![
            (-262_000i32..262_000, 1u32..13, 1u32..29, 0u32..24)
                .prop_map(|(y, m, d, h)| format!("{y:04}-{m:02}-{d:02}T{h:02}:00:00Z")),
            Just("2025-05-01T00:00:00Z".to_owned()),
            "[0-9TZ:.-]{0,25}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_flags_never_panic(
            interval in number(),
            rps in number(),
            concurrency in number(),
            window in number(),
            lock_timeout in proptest::option::of(number()),
            chain_id in number(),
            from in time(),
            to in proptest::option::of(time()),
            history in any::<bool>(),
        ) {
            let mut args = if history {
                line(&["price-history", &format!("--chain-id={chain_id}"), "--tokens", "A"])
            } else {
                line(&["candles", "--token", "T"])
            };
            // `--flag=value`, so that negative numbers are values, not flags.
            args.extend([format!("--interval={interval}"), format!("--from={from}")]);
            if let Some(to) = to {
                args.push(format!("--to={to}"));
            }
            args.extend([
                format!("--rps={rps}"),
                format!("--concurrency={concurrency}"),
                format!("--recent-window={window}"),
                "--dry-run".to_owned(),
            ]);
            if let Some(lock_timeout) = lock_timeout {
                args.push(format!("--lock-timeout={lock_timeout}"));
            }
            if let Ok(prepared) = prepare_line(&args) {
                prop_assert_eq!(prepared.jobs.len(), 1);
                prop_assert!(prepared.jobs[0].validate().is_ok());
                prop_assert!(prepared.sync.lock_timeout <= Duration::from_secs(7 * 86_400));
                // What the planner will lay out is bounded.
                if let Job::Candles { interval, from, to, .. }
                | Job::PriceHistory { interval, from, to, .. } = &prepared.jobs[0]
                {
                    let end = to.unwrap_or_else(Utc::now);
                    let range = Range::new(from.timestamp(), end.timestamp()).align_out(*interval);
                    prop_assert!(range.chunk_count(*interval) <= MAX_BARS_PER_JOB as u64 + 2);
                }
            }
        }
    }
}
