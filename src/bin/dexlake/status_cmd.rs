//! `dexlake status`, and the `--strict` flag of the analytics commands (the query decides
//! what it refuses).

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use dexlake::TimeRange;
use dexlake::coverage::LakeStatus;
use dexlake::error::escaped_in_full;
use dexlake::query::LakeQuery as _;

use crate::Global;
use crate::open_lake::{AsOfArg, reading_lake};
use crate::provenance::version_note;

/// How `dexlake status` prints.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFormat {
    /// A block of lines per dataset, a line per synced target.
    Table,
    /// One JSON document (`version`, `committed_at`, `datasets` with their `targets`).
    Json,
}

/// Arguments of `dexlake status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = StatusFormat::Table)]
    pub format: StatusFormat,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

/// The `--strict` flag of the analytics commands.
#[derive(Args, Debug, Clone, Copy)]
pub struct Strict {
    /// Fail (exit status 4, nothing on stdout) when the lake does not cover what the answer
    /// reads completely: a range never fetched, a partial view (such as one wallet's trades
    /// of a token), or a coverage the lake never recorded. Without it, each is a warning on
    /// stderr.
    #[arg(long)]
    pub strict: bool,
}

pub fn status(global: &Global, args: StatusArgs) -> anyhow::Result<ExitCode> {
    let lake = reading_lake(global, &args.as_of)?;
    let status = lake.query().status()?;
    version_note(status.version);
    match args.format {
        StatusFormat::Json => println!("{}", serde_json::to_string_pretty(&status)?),
        StatusFormat::Table => print!("{}", table(&status)),
    }
    Ok(ExitCode::SUCCESS)
}

fn at(t: Option<DateTime<Utc>>) -> String {
    t.map_or("-".into(), |t| {
        t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    })
}

fn spans(spans: &[TimeRange]) -> String {
    if spans.is_empty() {
        return "nothing".into();
    }
    spans
        .iter()
        .map(TimeRange::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The status as text: a header line per dataset, an indented line per target.
fn table(status: &LakeStatus) -> String {
    let mut out = format!(
        "lake version {}, last commit {}\n",
        status.version,
        at(status.committed_at)
    );
    if status.datasets.is_empty() {
        out.push_str("empty: no file committed, no sync recorded\n");
    }
    for d in &status.datasets {
        out.push_str(&format!(
            "{}: {} files, {} bytes, {} rows, {} .. {}\n",
            d.dataset,
            d.files,
            d.bytes,
            d.rows,
            at(d.first),
            at(d.last)
        ));
        for t in &d.targets {
            let rows = t.rows.map_or("-".into(), |r| r.to_string());
            let fetched = if t.fetched_known {
                spans(&t.fetched)
            } else {
                "unknown (synced by an older version)".into()
            };
            let mut line = format!(
                "  {}  rows {rows}  first {}  last {}  fetched {fetched}  synced {}",
                escaped_in_full(&t.target),
                at(t.first),
                at(t.last),
                at(t.synced_at)
            );
            if let Some(s) = t.snapshot_at {
                line.push_str(&format!("  snapshot {}", at(Some(s))));
            }
            if t.interrupted {
                line.push_str("  interrupted");
                if let Some(s) = t.partial_snapshot_at {
                    line.push_str(&format!(" (snapshot {} partial)", at(Some(s))));
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
