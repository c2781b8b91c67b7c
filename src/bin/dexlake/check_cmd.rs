//! `dexlake check`: the lake's data-quality findings (gaps, price jumps, candles against bars,
//! repeated ids, slot times, gaps and jumps in the stored series), each with its count and a
//! few examples.
//!
//! Exit status: 0 when nothing was found, 1 with findings; when the check could not run (the
//! error on stderr), the status of its error's kind (`dexlake --help`), or 2 for an error of no
//! listed kind, so that 1 always means findings. `--format json` prints one JSON document, the library's `CheckReport`.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use dexlake::analytics::quality::{self, CheckReport};
use dexlake::error::escaped_in_full;
use dexlake::query::LakeQuery as _;

use crate::open_lake::{AsOfArg, EventsAtOnceArg, reading_lake};
use crate::provenance::version_note;
use crate::{Global, address, error_text};

/// Exit status of a check that found something.
const FOUND: u8 = 1;
/// Exit status of a check that could not run for a reason of no listed kind.
const FAILED: u8 = 2;

/// Output formats of `dexlake check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// Counts and examples as text.
    Table,
    /// One JSON document.
    Json,
}

/// Arguments of `dexlake check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Check only these tokens (repeat the flag or separate with commas): their swaps and
    /// trades and their candles. Every token by default.
    #[arg(long = "token", value_name = "T", value_delimiter = ',', value_parser = address)]
    tokens: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: CheckFormat,
    /// Examples shown of each kind of finding.
    #[arg(long, default_value_t = quality::DEFAULT_EXAMPLES)]
    examples: usize,
    #[command(flatten)]
    pub as_of: AsOfArg,
    #[command(flatten)]
    events_at_once: EventsAtOnceArg,
}

/// Runs the check; its own errors exit by their kind, those of no listed kind with status 2.
pub fn run(global: &Global, args: CheckArgs) -> anyhow::Result<ExitCode> {
    match check(global, &args) {
        Ok(report) => {
            version_note(report.version);
            match args.format {
                CheckFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
                CheckFormat::Table => print!("{}", table(&report)),
            }
            Ok(ExitCode::from(if report.is_clean() { 0 } else { FOUND }))
        }
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            let status = match crate::exit::status(&e) {
                FOUND => FAILED,
                status => status,
            };
            Ok(ExitCode::from(status))
        }
    }
}

fn check(global: &Global, args: &CheckArgs) -> anyhow::Result<CheckReport> {
    let lake = reading_lake(global, &args.as_of)?;
    let query = args.events_at_once.apply(match args.tokens.as_slice() {
        [] => lake.query(),
        tokens => lake.query().tokens(tokens),
    });
    // Each step on its own line while it runs, on a terminal only.
    let terminal = std::io::stderr().is_terminal();
    let progress = |step: &str| {
        if terminal {
            eprintln!("check: {step}…");
        }
    };
    Ok(query.check(args.examples, &progress)?)
}

/// The report as text: what was checked, each kind's count, then the examples.
fn table(r: &CheckReport) -> String {
    let mut out = String::new();
    let rows: Vec<String> = r.rows.iter().map(|(d, n)| format!("{n} {d}")).collect();
    out.push_str(&format!(
        "manifest version {}: {} tokens with {} swaps; {} rows\n",
        r.version,
        r.tokens,
        r.swaps,
        rows.join(", ")
    ));
    let c = &r.reconciled;
    out.push_str(&format!(
        "candles: {} series, {} compared with the bars of their swaps over {} buckets\n",
        c.series, c.series_compared, c.buckets_compared
    ));
    let s = &r.series;
    out.push_str(&format!(
        "series: {} price histories and {} candle series, {} records checked for gaps and jumps\n",
        s.price_histories, s.candle_series, s.records
    ));
    let counts = r.findings.counts();
    let w = counts.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    out.push_str(&format!("{:w$}  count\n", "finding"));
    for (kind, n) in counts {
        out.push_str(&format!("{kind:w$}  {n:>5}\n"));
    }
    for ((kind, lines), (_, n)) in r.findings.described().into_iter().zip(counts) {
        if lines.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{kind} ({} of {n}):\n", lines.len()));
        for line in lines {
            out.push_str(&format!("  {}\n", escaped_in_full(&line)));
        }
    }
    if r.is_clean() {
        out.push_str("clean: no finding\n");
    } else {
        out.push_str(&format!("\n{} findings\n", r.total()));
    }
    out
}
