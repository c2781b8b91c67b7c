//! What every answer of the lake says of where it stands: `note: lake version N` on stderr
//! before its warnings ([`notes`]; `warning:` and `note:` lines escape their text as `error:`
//! lines do), and the provenance a Parquet file of an answer carries as key-value metadata in
//! its footer ([`provenance`]: the lake version, the query as given, the coverage, the warnings
//! and the dexlake that wrote it). The rows are the same bytes with or without it.

use dexlake::error::escaped_in_full;
use dexlake::query::Answer;
use serde_json::{Value, json};

use crate::output::Format;

/// Prints an answer's warnings on stderr, one line each after `warning: ` or `note: `.
/// Control characters are escaped as in `error:` lines (the text may quote arguments and
/// service data).
pub fn warn(warnings: &[dexlake::query::Warning]) {
    for w in warnings {
        eprintln!("{}: {}", w.kind.prefix(), escaped_in_full(&w.text));
    }
}

/// Prints what stderr says of every answer of the lake: the version it read, as
/// `note: lake version N`, then its warnings ([`warn`]).
pub fn notes<T>(answer: &Answer<T>) {
    version_note(answer.version);
    warn(&answer.warnings);
}

/// Prints `note: lake version N` on stderr: the version an answer read.
pub fn version_note(version: u64) {
    eprintln!("note: lake version {version}");
}

/// The keys of a Parquet output's provenance, in the order they are written.
pub const PROVENANCE_KEYS: [&str; 5] = [
    "dexlake.version",
    "dexlake.query",
    "dexlake.coverage",
    "dexlake.warnings",
    "dexlake.created_by",
];

/// The provenance of an answer, as the key-value metadata of the Parquet file it is written
/// to ([`PROVENANCE_KEYS`]): `dexlake.version`, the lake version it read (decimal);
/// `dexlake.query`, the command and its arguments as given (JSON `{"command": "ohlcv",
/// "args": [...]}`, without an `--api-key` and its value); `dexlake.coverage`, the coverage of
/// what it read (JSON: `dataset`, `targets` with `target`, `asked`, `missing`, `partial` and
/// `recorded`, and `notes`); `dexlake.warnings`, its warnings (a JSON list of `{"kind",
/// "text"}`, kind `coverage`, `no_events` or `empty`); and `dexlake.created_by`,
/// `dexlake <version>`.
pub fn provenance<T>(answer: &Answer<T>) -> anyhow::Result<Vec<(String, String)>> {
    let warnings: Vec<Value> = answer
        .warnings
        .iter()
        .map(|w| json!({"kind": w.kind.name(), "text": w.text}))
        .collect();
    let values = [
        answer.version.to_string(),
        query_of(
            std::env::args_os()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned()),
        )
        .to_string(),
        serde_json::to_string(&answer.coverage)?,
        Value::from(warnings).to_string(),
        format!("dexlake {}", env!("CARGO_PKG_VERSION")),
    ];
    Ok(PROVENANCE_KEYS
        .iter()
        .map(|k| k.to_string())
        .zip(values)
        .collect())
}

/// The [`provenance`] of `answer` when it is written as Parquet, else none.
pub fn metadata<T>(answer: &Answer<T>, format: Format) -> anyhow::Result<Vec<(String, String)>> {
    match format {
        Format::Parquet => provenance(answer),
        _ => Ok(Vec::new()),
    }
}

/// The global options that take a value (see [`Global`]), which may come before the command.
const GLOBAL_VALUES: [&str; 3] = ["--lake", "--base-url", "--api-key"];

/// The command line (without the program) as `dexlake.query` records it: the command, and
/// every other argument as given, in order, but an API key (`--api-key K`, `--api-key=K`).
fn query_of(args: impl IntoIterator<Item = String>) -> Value {
    let mut command: Option<String> = None;
    let mut kept = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--api-key" {
            args.next();
            continue;
        }
        if arg.starts_with("--api-key=") {
            continue;
        }
        if command.is_none() {
            if GLOBAL_VALUES.contains(&arg.as_str()) {
                kept.push(arg);
                kept.extend(args.next());
                continue;
            }
            if !arg.starts_with('-') {
                command = Some(arg);
                continue;
            }
        }
        kept.push(arg);
    }
    json!({"command": command, "args": kept})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query names the command, keeps every other argument as given (the global ones
    /// before it too), and drops the API key in both of its forms.
    #[test]
    fn the_query_is_the_command_line_without_the_api_key() {
        let query = |args: &[&str]| query_of(args.iter().map(|a| a.to_string()));
        assert_eq!(
            query(&[
                "--lake",
                "ohlcv",
                "ohlcv",
                "--token",
                "X",
                "--interval",
                "60"
            ]),
            json!({"command": "ohlcv", "args": ["--lake", "ohlcv", "--token", "X", "--interval", "60"]})
        );
        assert_eq!(
            query(&[
                "--api-key",
                "K",
                "pnl",
                "--top",
                "3",
                "--api-key=K2",
                "--lake=L"
            ]),
            json!({"command": "pnl", "args": ["--top", "3", "--lake=L"]})
        );
        assert_eq!(
            query(&["status", "--api-key", "K"]),
            json!({"command": "status", "args": []})
        );
    }
}
