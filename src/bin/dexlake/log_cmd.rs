//! `dexlake log`: the lake's history, one row per commit, newest first ([`Lake::history`]).

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use dexlake::error::escaped_in_full;
use dexlake::lake::{CommitRecord, Dataset, History};

use crate::Global;
use crate::open_lake::{AsOfArg, reading_lake};

/// How `dexlake log` prints.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// A line per commit: version, time, operation, what changed per dataset, the state set.
    Table,
    /// One JSON document: `{"records": [...], "unrecorded_before": N|null}`.
    Json,
}

/// Arguments of `dexlake log`.
#[derive(Args, Debug)]
pub struct LogArgs {
    /// Only the commits that added or removed files of this dataset (with only its change).
    #[arg(long)]
    pub dataset: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LogFormat::Table)]
    pub format: LogFormat,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

pub fn run(global: &Global, args: LogArgs) -> anyhow::Result<ExitCode> {
    let dataset: Option<Dataset> = args.dataset.as_deref().map(str::parse).transpose()?;
    let lake = reading_lake(global, &args.as_of)?;
    let mut history = lake.history()?;
    if let Some(d) = dataset {
        history.records.retain_mut(|r| {
            r.datasets.retain(|k, _| *k == d);
            !r.datasets.is_empty()
        });
    }
    match args.format {
        LogFormat::Json => println!("{}", json(&history)),
        LogFormat::Table => print!("{}", table(&history)),
    }
    Ok(ExitCode::SUCCESS)
}

fn json(history: &History) -> serde_json::Value {
    serde_json::json!({
        "records": history.records,
        "unrecorded_before": history.unrecorded_before,
    })
}

fn at(t: Option<DateTime<Utc>>) -> String {
    t.map_or("-".into(), |t| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    })
}

/// What a commit changed, dataset by dataset: `swaps +2 files +1200 rows -1 file -600 rows`.
fn changes(r: &CommitRecord) -> String {
    let plural = |n: u64, one: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    let parts: Vec<String> = r
        .datasets
        .iter()
        .map(|(d, c)| {
            let mut s = format!("{d}");
            if c.files_added > 0 {
                s.push_str(&format!(
                    " +{} +{}",
                    plural(c.files_added, "file"),
                    plural(c.rows_added, "row")
                ));
            }
            if c.files_removed > 0 {
                let rows = c
                    .rows_removed
                    .map_or("? rows".to_owned(), |n| plural(n, "row"));
                s.push_str(&format!(" -{} -{rows}", plural(c.files_removed, "file")));
            }
            if c.files_vacuumed > 0 {
                s.push_str(&format!(" vacuumed {}", plural(c.files_vacuumed, "file")));
            }
            s
        })
        .collect();
    if parts.is_empty() {
        "no files".into()
    } else {
        parts.join("; ")
    }
}

/// The history as text: a line per commit, then a note on the commits without a record.
fn table(history: &History) -> String {
    let mut out = String::new();
    if history.records.is_empty() && history.unrecorded_before.is_none() {
        out.push_str("no commits\n");
    }
    for r in &history.records {
        let mut line = format!(
            "{:>6}  {}  {:<8}  {}",
            r.version,
            at(r.committed_at),
            r.operation,
            changes(r)
        );
        if !r.state.is_empty() {
            let keys: Vec<String> = r.state.iter().map(|k| escaped_in_full(k)).collect();
            line.push_str(&format!("  state: {}", keys.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(v) = history.unrecorded_before {
        out.push_str(&format!(
            "commits before version {v} have no record (written before the lake kept its history)\n"
        ));
    }
    out
}
