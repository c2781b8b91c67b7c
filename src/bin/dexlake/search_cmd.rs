//! `dexlake search`: the service's search-profiles request answered from the lake (with
//! `--chain-id`, over an EVM chain's profiles: dexlake's extension).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use dexlake::api::profile_query::SearchRequest;
use dexlake::query::LakeQuery as _;
use serde_json::Value;

use crate::Global;
use crate::open_lake::{AsOfArg, reading_lake};
use crate::provenance::notes;
use crate::status_cmd::Strict;

/// How `dexlake search` prints its answer.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The service's response body `{count, cursor, data}`.
    Json,
    /// One aligned row per profile: `token_address` and the returned scalar fields.
    Table,
    /// The rows of `table` as CSV with a header.
    Csv,
}

/// Arguments of `dexlake search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// A JSON file holding the search-profiles request body (`-` for standard input).
    #[arg(long)]
    pub request: PathBuf,
    /// The profile snapshot: `latest`, or the RFC 3339 time it was fetched at.
    #[arg(long, default_value = "latest")]
    pub snapshot: String,
    /// Search the EVM profiles of this chain (synced with `sync profiles --chain-id N`)
    /// instead of the altchain's: dexlake's extension, over the fields an EVM profile has.
    #[arg(long)]
    pub chain_id: Option<i64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    #[command(flatten)]
    pub strict: Strict,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

pub fn run(global: &Global, args: SearchArgs) -> anyhow::Result<ExitCode> {
    let body = if args.request.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the request from stdin")?
    } else {
        std::fs::read_to_string(&args.request)
            .with_context(|| format!("reading {}", args.request.display()))?
    };
    let request = SearchRequest::from_json(&body)
        .with_context(|| format!("reading {}", args.request.display()))?;
    let snapshot = dexlake::query::args::snapshot(&args.snapshot)
        .map_err(|reason| anyhow::anyhow!("--snapshot {reason}"))?;
    let lake = reading_lake(global, &args.as_of)?;
    let query = lake.query().strict(args.strict.strict);
    let answer = match args.chain_id {
        None => query.search_covered(&request, snapshot)?,
        Some(chain_id) => query.search_evm_covered(chain_id, &request, snapshot)?,
    };
    notes(&answer);
    let page = answer.value;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&page)?),
        Format::Table | Format::Csv => {
            let (columns, rows) = flatten(&page.data);
            if args.format == Format::Csv {
                println!(
                    "{}",
                    columns
                        .iter()
                        .map(|c| csv_field(c))
                        .collect::<Vec<_>>()
                        .join(",")
                );
                for row in &rows {
                    println!(
                        "{}",
                        row.iter()
                            .map(|c| csv_field(c))
                            .collect::<Vec<_>>()
                            .join(",")
                    );
                }
            } else {
                let widths: Vec<usize> = (0..columns.len())
                    .map(|i| {
                        rows.iter()
                            .map(|r| r[i].chars().count())
                            .chain([columns[i].chars().count()])
                            .max()
                            .unwrap_or(0)
                    })
                    .collect();
                let line = |cells: &[String]| {
                    cells
                        .iter()
                        .zip(&widths)
                        .map(|(c, w)| format!("{c:w$}"))
                        .collect::<Vec<_>>()
                        .join("  ")
                        .trim_end()
                        .to_owned()
                };
                println!("{}", line(&columns));
                for row in &rows {
                    println!("{}", line(row));
                }
                println!(
                    "({} of {} matching profiles{})",
                    rows.len(),
                    page.count,
                    if page.cursor.is_some() {
                        "; more with the response's cursor (--format json)"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The rows of a page: `token_address` first, then every scalar leaf (dotted path) in order of
/// first appearance; arrays of scalars are joined with `;`.
fn flatten(data: &[Value]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut columns = vec!["token_address".to_owned()];
    let mut leaves: Vec<Vec<(String, String)>> = Vec::with_capacity(data.len());
    for doc in data {
        let mut out = Vec::new();
        walk(doc, "", &mut out);
        for (path, _) in &out {
            if !columns.contains(path) {
                columns.push(path.clone());
            }
        }
        leaves.push(out);
    }
    let rows = leaves
        .into_iter()
        .map(|out| {
            columns
                .iter()
                .map(|c| {
                    out.iter()
                        .find(|(p, _)| p == c)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    (columns, rows)
}

fn walk(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(v, &p, out);
            }
        }
        Value::Array(items) => {
            let parts: Option<Vec<String>> = items.iter().map(scalar).collect();
            if let Some(parts) = parts {
                out.push((path.to_owned(), parts.join(";")));
            }
        }
        Value::Null => {}
        v => out.extend(scalar(v).map(|s| (path.to_owned(), s))),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}
