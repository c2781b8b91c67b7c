//! Output of result frames, shared by the commands that print them: aligned text, CSV, JSON
//! (struct columns as nested objects) and Parquet.
//!
//! Struct columns are flattened to `parent.child` columns in text and CSV. Times are RFC 3339
//! in UTC (`Z`); a non-finite number is written as its text (`inf`, `NaN`), nulls as empty
//! cells or JSON `null`.
//!
//! The table is for people: floats with about six significant digits and thousands
//! separators ([`human_number`]), numbers aligned right, control characters of text (a wallet
//! address carrying escape sequences) escaped, and bars shown as their time, OHLC, volume and
//! count unless `--columns` asks for more. CSV, JSON and Parquet keep every column and every
//! bit of every float (Rust's shortest round-trip form). `warning:` and `note:` lines
//! ([`warning`], [`note`]) escape their text as `error:` lines do.
//!
//! Every answer of the lake says where it stands ([`notes`]): `note: lake version N` on
//! stderr, before its warnings; and a Parquet file of an answer carries its provenance as
//! key-value metadata in its footer ([`provenance`]: the lake version, the query as given,
//! the coverage, the warnings and the dexlake that wrote it). The rows are the same bytes
//! with or without it.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chrono::DateTime;
use clap::{Args, ValueEnum};
use dexlake::error::{escaped, escaped_in_full};
use dexlake::lake::Lake;
use dexlake::query::Answer;
use polars::io::parquet::write::{KeyValueMetadata, StatisticsOptions, get_encodings};
use polars::prelude::*;
use polars_parquet::write::{
    CompressedPage, CompressionOptions, Encoding, KeyValue, Version, WriteOptions,
    array_to_columns, compress, schema_to_metadata_key,
};
use rayon::prelude::*;
use serde_json::{Map, Value, json};

use crate::Global;

/// Beyond this many columns a table prints one block of `name value` lines per row (the 46
/// token metrics), as one line per row would not fit a terminal.
const WIDE_COLUMNS: usize = 30;

/// Output formats of the commands that print frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for a terminal.
    Table,
    /// Comma-separated values with a header.
    Csv,
    /// A JSON array of objects.
    Json,
    /// A Parquet file (needs --out).
    Parquet,
}

/// Output flags shared by the commands that print frames.
#[derive(Args, Debug)]
pub struct Output {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Columns to print, in this order (comma-separated; `all` for every one). By default
    /// every column, but the table of bars shows the token, time, OHLC, volume and count.
    /// Not for Parquet, whose file keeps every column.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub columns: Vec<String>,
}

impl Output {
    /// Prints the answer's [`notes`], then writes its frame as these flags ask (a Parquet file
    /// with the answer's [`provenance`]).
    pub fn emit(&self, answer: Answer<DataFrame>) -> anyhow::Result<ExitCode> {
        notes(&answer);
        let metadata = self.metadata(&answer)?;
        let df = self.select(answer.value)?;
        write(df, self.format, self.out.as_deref(), metadata)
    }

    /// The [`provenance`] of `answer` when these flags write Parquet, else none.
    pub fn metadata<T>(&self, answer: &Answer<T>) -> anyhow::Result<Vec<(String, String)>> {
        metadata(answer, self.format)
    }

    /// Refuses `--columns` with a format that keeps every column (for the commands that write
    /// Parquet without [`Output::emit`]).
    pub fn check_columns(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.columns.is_empty() || self.format != Format::Parquet,
            "--columns is for the table, CSV and JSON; a Parquet file keeps every column"
        );
        Ok(())
    }

    /// `df` with the columns `--columns` names, or the table's default ones.
    fn select(&self, df: DataFrame) -> anyhow::Result<DataFrame> {
        self.check_columns()?;
        match self.columns.as_slice() {
            [] if self.format == Format::Table => compact(df),
            [] => Ok(df),
            [all] if all == "all" => Ok(df),
            names => {
                let present: Vec<String> = df
                    .get_column_names()
                    .iter()
                    .map(|n| n.to_string())
                    .collect();
                for n in names {
                    anyhow::ensure!(
                        present.contains(n),
                        "--columns: no column {:?} in this output; its columns are {}",
                        escaped(n),
                        present.join(",")
                    );
                }
                Ok(df.select(names.iter().map(String::as_str))?)
            }
        }
    }
}

/// The columns the table of bars shows by default: the token (when the bars carry it), the
/// time, OHLC, the USD volume and the count.
pub const BAR_TABLE_COLUMNS: [&str; 8] = [
    "token_address",
    "timestamp",
    "open",
    "high",
    "low",
    "close",
    "volume",
    "count",
];

/// A frame of bars (`ohlcv`'s, `follow`'s) as the table shows it by default: its
/// [`BAR_TABLE_COLUMNS`]. Other frames are kept whole.
fn compact(df: DataFrame) -> anyhow::Result<DataFrame> {
    let has = |c: &str| df.get_column_index(c).is_some();
    if !BAR_TABLE_COLUMNS[1..].iter().all(|c| has(c)) {
        return Ok(df);
    }
    let keep: Vec<&str> = BAR_TABLE_COLUMNS.into_iter().filter(|c| has(c)).collect();
    Ok(df.select(keep)?)
}

/// Significant digits of a float in the table.
const SIGNIFICANT: i32 = 6;

/// A float as the table shows it: about six significant digits (all the digits of the
/// integer part), thousands separators, no trailing zeros; scientific notation below 1e-4
/// and from 1e15 in magnitude. `1234567.891` is `1,234,568`, `12.345678` is `12.3457`,
/// `0.0000001670163859` is `1.67016e-7`; `NaN` and `inf` as they are.
pub fn human_number(x: f64) -> String {
    fn trim(s: &str) -> &str {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            s
        }
    }
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    let a = x.abs();
    if !(1e-4..1e15).contains(&a) {
        let s = format!("{x:.*e}", (SIGNIFICANT - 1) as usize);
        return match s.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{exp}", trim(mantissa)),
            None => s,
        };
    }
    let digits = a.log10().floor() as i32 + 1;
    let decimals = (SIGNIFICANT - digits).max(0) as usize;
    let plain = format!("{a:.decimals$}");
    let plain = trim(&plain);
    let (int, frac) = plain.split_once('.').unwrap_or((plain, ""));
    let mut out = String::with_capacity(plain.len() + int.len() / 3 + 1);
    if x < 0.0 {
        out.push('-');
    }
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

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

/// Opens the lake of `--lake` for reading: creates nothing and takes no lock, so a read-only
/// lake reads, and refuses a folder that is not a lake (reading commands never create one).
pub fn existing_lake(global: &Global) -> anyhow::Result<Lake> {
    ensure_lake(global)?;
    let lake = Lake::open_existing(&global.lake)
        .with_context(|| format!("opening the lake {}", global.lake.display()))?;
    // Its clones share its store, and so what the store counts.
    let _ = OPENED.set(lake.clone());
    Ok(lake)
}

/// The lake a reading command opened, for [`print_transfer_stats`].
static OPENED: std::sync::OnceLock<Lake> = std::sync::OnceLock::new();

/// Set (to anything) to print what the command fetched from the lake's object store on
/// standard error when it ends: for the benchmarks, not documented.
pub const TRANSFER_STATS_ENV: &str = "DEXLAKE_TRANSFER_STATS";

/// Prints what the lake a reading command opened fetched from its object store (GET requests
/// and bytes), when [`TRANSFER_STATS_ENV`] is set.
pub fn print_transfer_stats() {
    if std::env::var_os(TRANSFER_STATS_ENV).is_none() {
        return;
    }
    let stats = OPENED.get().map(Lake::transfer_stats).unwrap_or_default();
    eprintln!(
        "transfer: {} GET requests, {} bytes",
        stats.get_requests, stats.get_bytes
    );
}

/// Refuses a `--lake` that is not a lake, for the commands that never create one.
pub fn ensure_lake(global: &Global) -> anyhow::Result<()> {
    if !Lake::exists(&global.lake)? {
        crate::exit::usage_bail!(
            "not a dexlake lake: {}; run `dexlake sync` to create one, or set --lake or DEXLAKE_LAKE to a lake",
            global.lake.display()
        );
    }
    Ok(())
}

/// A column flattened for output: its name (`parent.child` for struct fields), the JSON path,
/// its cells, and whether it holds numbers (aligned right in the table).
struct OutColumn {
    name: String,
    path: Vec<String>,
    cells: Vec<Value>,
    numeric: bool,
}

fn cells(s: &Series) -> anyhow::Result<Vec<Value>> {
    let dtype = s.dtype().clone();
    Ok(match dtype {
        DataType::String => s
            .str()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        DataType::Boolean => s
            .bool()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        DataType::Float32 | DataType::Float64 => s
            .cast(&DataType::Float64)?
            .f64()?
            .iter()
            .map(|v| match v {
                Some(x) if x.is_finite() => Value::from(x),
                Some(x) => Value::from(x.to_string()),
                None => Value::Null,
            })
            .collect(),
        DataType::Datetime(unit, _) => {
            let scale = match unit {
                TimeUnit::Nanoseconds => 1_000,
                TimeUnit::Microseconds => 1,
                TimeUnit::Milliseconds => -1_000,
            };
            s.cast(&DataType::Int64)?
                .i64()?
                .iter()
                .map(|v| {
                    let micros = v.map(|v| match scale {
                        1_000 => v / 1_000,
                        -1_000 => v * 1_000,
                        _ => v,
                    });
                    micros
                        .and_then(DateTime::from_timestamp_micros)
                        .map_or(Value::Null, |t| {
                            Value::from(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
                        })
                })
                .collect()
        }
        d if d.is_integer() => s
            .cast(&DataType::Int64)?
            .i64()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        _ => s
            .cast(&DataType::String)?
            .str()?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
    })
}

fn flatten(df: &DataFrame) -> anyhow::Result<Vec<OutColumn>> {
    let mut out = Vec::new();
    for c in df.columns() {
        let s = c.as_materialized_series();
        if let DataType::Struct(_) = s.dtype() {
            for f in s.struct_()?.fields_as_series() {
                out.push(OutColumn {
                    name: format!("{}.{}", s.name(), f.name()),
                    path: vec![s.name().to_string(), f.name().to_string()],
                    cells: cells(&f)?,
                    numeric: f.dtype().is_primitive_numeric(),
                });
            }
        } else {
            out.push(OutColumn {
                name: s.name().to_string(),
                path: vec![s.name().to_string()],
                cells: cells(s)?,
                numeric: s.dtype().is_primitive_numeric(),
            });
        }
    }
    Ok(out)
}

/// One cell as text (CSV and table): floats in Rust's shortest round-trip form (`13`, `9.8`),
/// times in RFC 3339, nulls empty.
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => n.as_f64().map_or_else(String::new, |x| x.to_string()),
        other => other.to_string(),
    }
}

/// One cell as the table shows it: floats for people ([`human_number`]), the control
/// characters of text escaped.
fn table_text(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => n.as_f64().map_or_else(String::new, human_number),
        Value::String(s) => escaped_in_full(s),
        other => text(other),
    }
}

/// Each column's width and whether it holds numbers (aligned right).
type Layout = Vec<(usize, bool)>;

/// Width of a cell of the table, in characters.
fn width(s: &str) -> usize {
    s.chars().count()
}

/// A line of the table: each cell padded to its column's width (numbers on the right),
/// two spaces apart.
fn table_line(cells: &[&str], layout: &[(usize, bool)]) -> String {
    let parts: Vec<String> = cells
        .iter()
        .zip(layout)
        .map(|(s, &(w, right))| {
            if right {
                format!("{s:>w$}")
            } else {
                format!("{s:w$}")
            }
        })
        .collect();
    format!("{}\n", parts.join("  ").trim_end())
}

fn csv_field(s: String) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// Each row as the JSON object `--format json` prints (struct columns as nested objects).
fn json_objects(cols: &[OutColumn], rows: usize) -> anyhow::Result<Vec<Value>> {
    let mut items = Vec::with_capacity(rows);
    for r in 0..rows {
        let mut obj = Map::new();
        for c in cols {
            let mut target = &mut obj;
            for p in &c.path[..c.path.len() - 1] {
                target = target
                    .entry(p.clone())
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .context("a struct column's parent is an object")?;
            }
            target.insert(c.path[c.path.len() - 1].clone(), c.cells[r].clone());
        }
        items.push(Value::Object(obj));
    }
    Ok(items)
}

/// The rows of `df` as JSON lines: each the object `--format json` prints for it, on one line.
pub fn json_lines(df: &DataFrame) -> anyhow::Result<String> {
    let cols = flatten(df)?;
    let mut out = String::new();
    for item in json_objects(&cols, df.height())? {
        out.push_str(&serde_json::to_string(&item)?);
        out.push('\n');
    }
    Ok(out)
}

/// Follow's table: the bars of each poll as they close, under one header, on standard
/// output, in the columns and widths of the first bars printed (a later, wider cell only
/// pushes its line); and a status line on standard error, rewritten in place on a terminal.
/// On a terminal, bars printed while a status line shows replace it (the next status comes
/// after them).
pub struct LiveTable {
    /// The columns shown, their widths and whether they are numbers, once bars printed.
    layout: Option<(Vec<String>, Layout)>,
    /// Whether a status line written in place has not been ended.
    status_shown: bool,
    /// Whether the status line is rewritten in place (standard error is a terminal).
    in_place: bool,
    /// Whether the bars go to the status line's terminal (standard output is one too).
    shared: bool,
}

impl Default for LiveTable {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveTable {
    /// A table for this process's standard output and error.
    pub fn new() -> LiveTable {
        let in_place = std::io::stderr().is_terminal();
        LiveTable {
            layout: None,
            status_shown: false,
            in_place,
            shared: in_place && std::io::stdout().is_terminal(),
        }
    }

    /// The text of closed bars: the header the first time, then one line per bar.
    pub fn lines(&mut self, closed: &DataFrame) -> anyhow::Result<String> {
        let cols = flatten(&compact(closed.clone())?)?;
        let texts: Vec<Vec<String>> = cols
            .iter()
            .map(|c| c.cells.iter().map(table_text).collect())
            .collect();
        let first = self.layout.is_none();
        let (names, layout) = self.layout.get_or_insert_with(|| {
            let names: Vec<String> = cols.iter().map(|c| escaped_in_full(&c.name)).collect();
            // Room for six significant digits with separators, and for every cell seen.
            let layout: Layout = names
                .iter()
                .zip(&cols)
                .zip(&texts)
                .map(|((n, c), t)| {
                    let floor = if c.numeric { 10 } else { 0 };
                    let w = t.iter().map(|s| width(s)).max().unwrap_or(0);
                    (w.max(width(n)).max(floor), c.numeric)
                })
                .collect();
            (names, layout)
        });
        let mut out = String::new();
        if first {
            let header: Vec<&str> = names.iter().map(String::as_str).collect();
            out.push_str(&table_line(&header, layout));
        }
        let shown: Vec<String> = cols.iter().map(|c| escaped_in_full(&c.name)).collect();
        anyhow::ensure!(
            &shown == names,
            "the bars' columns changed during the follow: {} then {}",
            names.join(","),
            shown.join(",")
        );
        for r in 0..closed.height() {
            let cells: Vec<&str> = texts.iter().map(|t| t[r].as_str()).collect();
            out.push_str(&table_line(&cells, layout));
        }
        Ok(out)
    }

    /// Prints closed bars (nothing when there are none) on standard output.
    pub fn print(&mut self, closed: &DataFrame) -> anyhow::Result<()> {
        if closed.height() == 0 {
            return Ok(());
        }
        let mut text = self.lines(closed)?;
        if self.status_shown && self.shared {
            // The bars take the status line's place.
            text.insert_str(0, "\r\x1b[K");
            self.status_shown = false;
        }
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
        Ok(())
    }

    /// Shows `text` as the status line: rewritten in place on a terminal, one line each
    /// time otherwise. Control characters are escaped.
    pub fn status(&mut self, text: &str) {
        let text = escaped(text);
        let mut err = std::io::stderr().lock();
        let _ = if self.in_place {
            self.status_shown = true;
            write!(err, "\r\x1b[K{text}")
        } else {
            writeln!(err, "{text}")
        };
        let _ = err.flush();
    }

    /// Ends a status line shown in place, so that what is printed next (a message on
    /// standard error) starts a line of its own.
    pub fn end_status(&mut self) {
        if std::mem::take(&mut self.status_shown) {
            eprintln!();
        }
    }
}

impl Drop for LiveTable {
    fn drop(&mut self) {
        self.end_status();
    }
}

fn render(df: &DataFrame, format: Format) -> anyhow::Result<Vec<u8>> {
    let cols = flatten(df)?;
    let rows = df.height();
    let mut out = String::new();
    match format {
        Format::Csv => {
            let header: Vec<String> = cols.iter().map(|c| csv_field(c.name.clone())).collect();
            out.push_str(&header.join(","));
            out.push('\n');
            for r in 0..rows {
                let line: Vec<String> = cols.iter().map(|c| csv_field(text(&c.cells[r]))).collect();
                out.push_str(&line.join(","));
                out.push('\n');
            }
        }
        Format::Json => {
            out = serde_json::to_string_pretty(&json_objects(&cols, rows)?)?;
            out.push('\n');
        }
        Format::Table if cols.len() > WIDE_COLUMNS => {
            // Wide frames read better as one block of `name value` lines per row.
            let names: Vec<String> = cols.iter().map(|c| escaped_in_full(&c.name)).collect();
            let w = names.iter().map(|n| width(n)).max().unwrap_or(0);
            for r in 0..rows {
                if r > 0 {
                    out.push('\n');
                }
                for (c, name) in cols.iter().zip(&names) {
                    out.push_str(&format!("{name:w$}  {}\n", table_text(&c.cells[r])));
                }
            }
        }
        Format::Table => {
            let names: Vec<String> = cols.iter().map(|c| escaped_in_full(&c.name)).collect();
            let texts: Vec<Vec<String>> = cols
                .iter()
                .map(|c| c.cells.iter().map(table_text).collect())
                .collect();
            let layout: Vec<(usize, bool)> = cols
                .iter()
                .zip(&names)
                .zip(&texts)
                .map(|((c, n), t)| {
                    let w = t.iter().map(|s| width(s)).max().unwrap_or(0);
                    (w.max(width(n)), c.numeric)
                })
                .collect();
            let header: Vec<&str> = names.iter().map(String::as_str).collect();
            out.push_str(&table_line(&header, &layout));
            for r in 0..rows {
                let cells: Vec<&str> = texts.iter().map(|t| t[r].as_str()).collect();
                out.push_str(&table_line(&cells, &layout));
            }
        }
        Format::Parquet => anyhow::bail!("Parquet output is written by `emit`, not rendered"),
    }
    Ok(out.into_bytes())
}

/// Prints the answer's [`notes`], then writes its frame as `format` asks, to `out` or
/// standard output (a Parquet file with the answer's [`provenance`]).
pub fn emit(
    answer: Answer<DataFrame>,
    format: Format,
    out: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    notes(&answer);
    let metadata = metadata(&answer, format)?;
    write(answer.value, format, out, metadata)
}

/// Writes `df` as `format` asks, to `out` or standard output; a Parquet file carries
/// `metadata` as its key-value metadata (after polars' Arrow schema).
fn write(
    mut df: DataFrame,
    format: Format,
    out: Option<&Path>,
    metadata: Vec<(String, String)>,
) -> anyhow::Result<ExitCode> {
    if format == Format::Parquet {
        let path = out.context("--format parquet needs --out FILE")?;
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut writer = parquet_writer(file)?;
        if !metadata.is_empty() {
            writer = writer.with_key_value_metadata(Some(KeyValueMetadata::from_static(metadata)));
        }
        let written = writer.finish(&mut df);
        anyhow::Context::with_context(written, || format!("writing {}", path.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let bytes = render(&df, format)?;
    match out {
        Some(path) => {
            std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?
        }
        None => std::io::stdout().lock().write_all(&bytes)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The zstd level of the CLI's Parquet output: on 4 M bars, level 1 writes 2 % more bytes than
/// polars' default level 3 in three quarters of the time (BENCHMARKS.md, "Analytics: OHLCV
/// bars").
const ZSTD_LEVEL: i32 = 1;

fn parquet_writer(file: File) -> anyhow::Result<ParquetWriter<File>> {
    let level = anyhow::Context::context(
        polars::polars_utils::compression::ZstdLevel::try_new(ZSTD_LEVEL),
        "zstd level 1",
    )?;
    Ok(ParquetWriter::new(file).with_compression(ParquetCompression::Zstd(Some(level))))
}

/// The page options of [`parquet_writer`] (polars' defaults but the compression).
fn page_options() -> anyhow::Result<WriteOptions> {
    let level = anyhow::Context::context(
        polars_parquet::write::ZstdLevel::try_new(ZSTD_LEVEL),
        "zstd level 1",
    )?;
    Ok(WriteOptions {
        statistics: StatisticsOptions::default(),
        version: Version::V1,
        compression: CompressionOptions::Zstd(Some(level)),
        data_page_size: None,
    })
}

/// A string column without nulls whose equal values come in runs (a token's bars), as the
/// dictionary polars would build for it (values in order of first appearance, `u32` codes):
/// one lookup per run instead of one hash per row. `None` for other columns, and where
/// polars would not use a dictionary (more than 3 distinct values in 4).
fn runs_as_dictionary(array: &dyn polars_arrow::array::Array) -> Option<ArrayRef> {
    use polars_arrow::array::{Array, DictionaryArray, PrimitiveArray, Utf8ViewArray};
    use polars_arrow::datatypes::IntegerType;
    let strings = array.as_any().downcast_ref::<Utf8ViewArray>()?;
    if strings.null_count() > 0 {
        return None;
    }
    let mut codes: PlHashMap<&str, u32> = PlHashMap::default();
    let mut values: Vec<&str> = Vec::new();
    let mut keys: Vec<u32> = Vec::with_capacity(strings.len());
    let mut last: Option<(&str, u32)> = None;
    for v in strings.values_iter() {
        let code = match last {
            Some((l, c)) if l == v => c,
            _ => {
                let c = *codes.entry(v).or_insert_with(|| {
                    values.push(v);
                    (values.len() - 1) as u32
                });
                last = Some((v, c));
                c
            }
        };
        keys.push(code);
    }
    if strings.len() > 128 && values.len() as f64 / strings.len() as f64 > 0.75 {
        return None;
    }
    let values = Utf8ViewArray::from_slice_values(&values);
    let dtype =
        ArrowDataType::Dictionary(IntegerType::UInt32, Box::new(values.dtype().clone()), false);
    let dictionary =
        DictionaryArray::<u32>::try_new(dtype, PrimitiveArray::from_vec(keys), values.boxed())
            .ok()?;
    Some(dictionary.boxed())
}

/// A column whose data pages zstd shrinks by less than this share in its first row group of at
/// least [`MIN_SAMPLE`] bytes is written uncompressed from the next row group on. Bars' prices
/// and sums (nearly all distinct floats) shrink by 5 to 7 %, and compressing them was most of
/// the output's compression time; counts, timestamps, token addresses and the often-zero buy
/// and sell volumes shrink by 14 to 99 % and stay compressed.
const MIN_SAVING: f64 = 0.10;

/// The encoded bytes a column's row group needs before its saving decides anything: a few
/// values say little, and zstd's frame overhead alone can outweigh them.
const MIN_SAMPLE: usize = 64 << 10;

/// A Parquet file written batch by batch (one or more row groups per batch), created at the
/// first batch: a result that is never written leaves no file. The pages of a row group are
/// encoded and compressed in parallel, a column per task (polars' batched writer compresses
/// them one after another on the writing thread), then written in order.
///
/// Every column is compressed (zstd level 1) until a row group gives it [`MIN_SAMPLE`] bytes;
/// a column that saved less than [`MIN_SAVING`] there is written uncompressed in the row
/// groups that follow. Parquet records the codec per column chunk, so every reader reads the
/// mix; the choice depends only on the data and the batches, never on the thread count.
pub struct ParquetSink<'a> {
    path: &'a Path,
    writer: Option<polars::io::parquet::write::BatchedWriter<File>>,
    /// Per column, whether its pages are compressed, once a row group has decided it.
    compressed: Vec<Option<bool>>,
    /// Rows written so far.
    pub rows: usize,
}

/// The pages of one column of a row group, with the sizes of its data pages before and after
/// compression.
struct ColumnPages {
    pages: Vec<Vec<CompressedPage>>,
    raw: usize,
    packed: usize,
}

impl<'a> ParquetSink<'a> {
    pub fn new(path: &'a Path) -> Self {
        ParquetSink {
            path,
            writer: None,
            compressed: Vec::new(),
            rows: 0,
        }
    }

    pub fn write(&mut self, df: &DataFrame) -> anyhow::Result<()> {
        let path = self.path;
        let context = || format!("writing {}", path.display());
        let writer = match &mut self.writer {
            Some(w) => w,
            None => {
                let file =
                    File::create(path).with_context(|| format!("creating {}", path.display()))?;
                let writer = parquet_writer(file)?.batched(df.schema());
                self.writer
                    .insert(anyhow::Context::with_context(writer, context)?)
            }
        };
        let mut df = df.clone();
        df.align_chunks_par();
        let options = page_options()?;
        // Floats are written plain: polars would estimate each float column's distinct values
        // and build a dictionary, then drop it as not worth it (prices and sums are nearly all
        // distinct), for the same pages. 64-bit integers and timestamps are delta-encoded
        // instead of dictionary-encoded: a token's bar times step by the bar width, so 4 M bar
        // times take 8.6 MB instead of 14.6 MB, with no dictionary to build.
        let arrow_schema = df.schema().to_arrow(CompatLevel::newest());
        let encodings: Vec<Vec<Encoding>> = get_encodings(&arrow_schema)
            .iter()
            .zip(arrow_schema.iter_values())
            .map(|(encoding, field)| match field.dtype() {
                ArrowDataType::Float32 | ArrowDataType::Float64 => vec![Encoding::Plain],
                ArrowDataType::Int64 | ArrowDataType::Timestamp(_, _) => {
                    vec![Encoding::DeltaBinaryPacked]
                }
                _ => encoding.clone(),
            })
            .collect();
        let fields = writer.parquet_schema().fields().to_vec();
        for batch in df.iter_chunks(CompatLevel::newest(), false) {
            let rows = batch.len();
            if rows == 0 {
                continue;
            }
            self.compressed.resize(batch.columns().len(), None);
            let compressed = &self.compressed;
            let columns: PolarsResult<Vec<ColumnPages>> = batch
                .columns()
                .par_iter()
                .zip(&fields)
                .zip(&encodings)
                .enumerate()
                .map(|(i, ((array, field), encoding))| {
                    let compression = match compressed[i] {
                        Some(false) => CompressionOptions::Uncompressed,
                        _ => options.compression,
                    };
                    let runs = runs_as_dictionary(array.as_ref());
                    let array = runs.as_ref().unwrap_or(array);
                    let (mut raw, mut packed) = (0, 0);
                    let pages = array_to_columns(array, field.clone(), options, encoding)?
                        .into_iter()
                        .map(|column| {
                            column
                                .map(|page| {
                                    let page = compress(page?, Vec::new(), compression)?;
                                    if let CompressedPage::Data(data) = &page {
                                        raw += data.uncompressed_size();
                                        packed += data.compressed_size();
                                    }
                                    Ok(page)
                                })
                                .collect::<PolarsResult<Vec<CompressedPage>>>()
                        })
                        .collect::<PolarsResult<Vec<_>>>()?;
                    Ok(ColumnPages { pages, raw, packed })
                })
                .collect();
            let columns = anyhow::Context::with_context(columns, context)?;
            for (decided, c) in self.compressed.iter_mut().zip(&columns) {
                if decided.is_none() && c.raw >= MIN_SAMPLE {
                    *decided = Some((c.packed as f64) < (c.raw as f64) * (1.0 - MIN_SAVING));
                }
            }
            let pages: Vec<Vec<CompressedPage>> =
                columns.into_iter().flat_map(|c| c.pages).collect();
            anyhow::Context::with_context(writer.write_row_group(rows as u64, &pages), context)?;
        }
        self.rows += df.height();
        Ok(())
    }

    /// [`ParquetSink::write`] as the library's sinks take it: a failure is an I/O error on
    /// the file.
    pub fn write_frame(&mut self, df: &DataFrame) -> dexlake::Result<()> {
        let path = self.path.to_owned();
        self.write(df).map_err(|e| dexlake::Error::Io {
            action: "writing",
            path,
            source: std::io::Error::other(format!("{e:#}")),
        })
    }

    /// Ends the file (when a batch created it) with `metadata` as its key-value metadata,
    /// after polars' Arrow schema, as [`write`] ends a file written at once.
    pub fn finish(self, metadata: Vec<(String, String)>) -> anyhow::Result<()> {
        let Some(w) = self.writer else {
            return Ok(());
        };
        let context = || format!("writing {}", self.path.display());
        let mut file = w
            .get_writer()
            .lock()
            .map_err(|_| anyhow::anyhow!("the writer failed earlier"))
            .with_context(context)?;
        let mut key_values = vec![schema_to_metadata_key(file.schema())];
        key_values.extend(metadata.into_iter().map(|(key, value)| KeyValue {
            key,
            value: Some(value),
        }));
        anyhow::Context::with_context(file.end(Some(key_values)), context)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_for_people_have_six_digits_and_separators() {
        let cases = [
            (0.0000001670163859039598, "1.67016e-7"),
            (1234567.891, "1,234,568"),
            (-1234567.891, "-1,234,568"),
            (12.345678, "12.3457"),
            (999.5, "999.5"),
            (1000.0, "1,000"),
            (123456.7, "123,457"),
            (0.000123456789, "0.000123457"),
            (0.5, "0.5"),
            (13.0, "13"),
            (0.0, "0"),
            (1e15, "1e15"),
            (2.5e300, "2.5e300"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
        ];
        for (x, shown) in cases {
            assert_eq!(human_number(x), shown, "{x:e}");
        }
    }

    /// Follow's table: one header for every batch, the widths of the first batch, the bar
    /// columns only, text escaped.
    #[test]
    fn the_live_table_prints_its_header_once() {
        let bars = |token: &str, close: f64| {
            df!(
                "token_address" => [token],
                "timestamp" => [1_700_000_000_000_000i64],
                "open" => [1.0f64],
                "high" => [2.0f64],
                "low" => [0.5f64],
                "close" => [close],
                "volume" => [12345.678f64],
                "sum_pq" => [1.0f64],
                "count" => [3i64],
            )
            .unwrap()
        };
        let mut table = LiveTable::new();
        let first = table.lines(&bars("T1", 1.23456789)).unwrap();
        let second = table.lines(&bars("T\u{1b}2", 0.000012345)).unwrap();
        let lines: Vec<&str> = first.lines().chain(second.lines()).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(
            header,
            [
                "token_address",
                "timestamp",
                "open",
                "high",
                "low",
                "close",
                "volume",
                "count"
            ]
        );
        assert!(
            lines[1].contains("1.23457") && lines[1].contains("12,345.7"),
            "{lines:?}"
        );
        assert!(lines[2].starts_with("T\\u{1b}2"), "{lines:?}");
        assert!(lines[2].contains("1.2345e-5"), "{lines:?}");
        assert_eq!(lines[1].chars().count(), lines[0].chars().count());
    }

    /// Batches through the sink read back as the frames stacked: string runs that come back
    /// after other values, mostly distinct strings, nulls in strings and floats.
    #[test]
    fn the_sink_writes_what_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        let frame = |tokens: Vec<Option<&str>>| {
            let n = tokens.len();
            let x: Vec<Option<f64>> = (0..n)
                .map(|i| (i % 5 != 3).then_some(i as f64 / 7.0))
                .collect();
            df!(
                "token_address" => tokens,
                "x" => x,
                "count" => (0..n as i64).collect::<Vec<_>>(),
            )
            .unwrap()
        };
        let runs: Vec<Option<&str>> = ["B", "B", "A", "A", "A", "B", "C", "C"]
            .iter()
            .cycle()
            .take(400)
            .map(|s| Some(*s))
            .collect();
        let names: Vec<String> = (0..300).map(|i| format!("T{i}")).collect();
        let distinct: Vec<Option<&str>> = names.iter().map(|s| Some(s.as_str())).collect();
        let with_nulls: Vec<Option<&str>> = vec![Some("A"), None, Some("A"), Some("B"), None];
        let frames = [frame(runs), frame(distinct), frame(with_nulls)];
        let (back, all) = round_trip(&path, &frames);
        assert!(back.equals_missing(&all), "{back}\n{all}");
    }

    /// Writes `frames` through a sink to `path`; returns the file read back and the frames
    /// stacked.
    fn round_trip(path: &Path, frames: &[DataFrame]) -> (DataFrame, DataFrame) {
        let mut sink = ParquetSink::new(path);
        for f in frames {
            sink.write(f).unwrap();
        }
        sink.finish(Vec::new()).unwrap();
        let back = ParquetReader::new(File::open(path).unwrap())
            .finish()
            .unwrap();
        let mut all = frames[0].clone();
        for f in &frames[1..] {
            all.vstack_mut(f).unwrap();
        }
        (back, all)
    }

    /// The bytes of a Parquet file before its footer (its data pages and indexes), and the
    /// footer's key-value metadata.
    fn parts(path: &Path) -> (Vec<u8>, Vec<(String, Option<String>)>) {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let bytes = std::fs::read(path).unwrap();
        let n = bytes.len();
        let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
        let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
        let kv = reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .map(|kv| {
                kv.iter()
                    .map(|kv| (kv.key.clone(), kv.value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        (bytes[..n - 8 - footer].to_vec(), kv)
    }

    /// Metadata changes the footer only: the data before it is the same bytes, written at
    /// once or batch by batch, and the footer holds polars' Arrow schema, then the metadata.
    #[test]
    fn metadata_changes_the_footer_only() {
        let dir = tempfile::tempdir().unwrap();
        let frame = df!(
            "token_address" => ["A", "A", "B"],
            "x" => [1.5f64, 2.5, f64::NAN],
            "count" => [1i64, 2, 3],
        )
        .unwrap();
        let metadata = vec![
            ("dexlake.version".to_owned(), "7".to_owned()),
            (
                "dexlake.query".to_owned(),
                "{\"command\":\"ohlcv\"}".to_owned(),
            ),
        ];
        let at_once = |name: &str, metadata: Vec<(String, String)>| {
            let path = dir.path().join(name);
            write(frame.clone(), Format::Parquet, Some(&path), metadata).unwrap();
            parts(&path)
        };
        let batched = |name: &str, metadata: Vec<(String, String)>| {
            let path = dir.path().join(name);
            let mut sink = ParquetSink::new(&path);
            sink.write(&frame).unwrap();
            sink.write(&frame).unwrap();
            sink.finish(metadata).unwrap();
            parts(&path)
        };
        for (bare, with) in [
            (
                at_once("a.parquet", Vec::new()),
                at_once("b.parquet", metadata.clone()),
            ),
            (
                batched("c.parquet", Vec::new()),
                batched("d.parquet", metadata.clone()),
            ),
        ] {
            assert_eq!(bare.0, with.0);
            let keys = |kv: &[(String, Option<String>)]| -> Vec<String> {
                kv.iter().map(|(k, _)| k.clone()).collect()
            };
            assert_eq!(keys(&bare.1), ["ARROW:schema"]);
            assert_eq!(
                keys(&with.1),
                ["ARROW:schema", "dexlake.version", "dexlake.query"]
            );
            assert_eq!(bare.1[0], with.1[0]);
            assert_eq!(with.1[2].1.as_deref(), Some("{\"command\":\"ohlcv\"}"));
        }
    }

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

    /// A column that zstd barely shrinks in its first row group of enough bytes is written
    /// uncompressed from the next one on; one that shrinks stays compressed; integers are
    /// delta-encoded; the file reads back whole.
    #[test]
    fn columns_that_do_not_shrink_are_written_uncompressed_once_measured() {
        use parquet::basic::Compression;
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        // splitmix64: floats with random mantissas, which no compressor shrinks.
        let noise = |seed: u64, n: usize| -> Vec<f64> {
            (0..n as u64)
                .map(|i| {
                    let mut z = (seed * 1_000_003 + i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    1.0 + (z >> 12) as f64 / (1u64 << 52) as f64
                })
                .collect()
        };
        let frame = |seed: u64, n: usize| {
            df!(
                "price" => noise(seed, n),
                "buy_volume" => (0..n).map(|i| if i % 3 == 0 { 5.0 } else { 0.0 }).collect::<Vec<f64>>(),
                "count" => (0..n as i64).map(|i| i / 7).collect::<Vec<i64>>(),
            )
            .unwrap()
        };
        // A first row group too small to decide, then three of 160 KB per column.
        let frames = [
            frame(1, 10),
            frame(2, 20_000),
            frame(3, 20_000),
            frame(4, 20_000),
        ];
        let (back, all) = round_trip(&path, &frames);
        assert!(back.equals_missing(&all));

        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.num_row_groups(), 4);
        let codecs: Vec<(bool, bool)> = meta
            .row_groups()
            .iter()
            .map(|rg| {
                let zstd = |c: usize| matches!(rg.column(c).compression(), Compression::ZSTD(_));
                (zstd(0), zstd(1))
            })
            .collect();
        assert_eq!(
            codecs,
            vec![(true, true), (true, true), (false, true), (false, true)]
        );
        // 64-bit integers are delta-encoded.
        let count = meta.row_group(0).column(2);
        assert!(
            count
                .encodings()
                .any(|e| e == parquet::basic::Encoding::DELTA_BINARY_PACKED),
            "{:?}",
            count.encodings().collect::<Vec<_>>()
        );
    }
}
