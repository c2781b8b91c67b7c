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
//! bit of every float (Rust's shortest round-trip form). The JSON rows and the cells every
//! format shows are the library's (`dexlake::query::json_rows`), which `dexlake serve`'s API
//! answers too.
//!
//! Beside it: `provenance.rs` (what stderr and a Parquet footer say of every answer: the lake
//! version, the query, the coverage, the warnings), `parquet_out.rs` (the Parquet writer
//! options and the streaming [`ParquetSink`](crate::parquet_out::ParquetSink)) and
//! `open_lake.rs` (opening the lake of a reading command, `--as-of`).

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use dexlake::error::{escaped, escaped_in_full};
use dexlake::query::Answer;
use polars::io::parquet::write::KeyValueMetadata;
use polars::prelude::*;
use serde_json::Value;

use crate::parquet_out::parquet_writer;
use crate::provenance::{metadata, notes};

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
    /// Write to this file instead of standard output (required with `--format parquet`,
    /// refused before any work).
    #[arg(long, required_if_eq("format", "parquet"))]
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

/// A column flattened for output: its name (`parent.child` for struct fields), its cells, and whether it holds numbers (aligned right in the table).
struct OutColumn {
    name: String,
    cells: Vec<Value>,
    numeric: bool,
}

/// A column's cells as the JSON output writes them (the library's one rendering).
fn cells(s: &Series) -> anyhow::Result<Vec<Value>> {
    Ok(dexlake::query::json_cells(s)?)
}

fn flatten(df: &DataFrame) -> anyhow::Result<Vec<OutColumn>> {
    let mut out = Vec::new();
    for c in df.columns() {
        let s = c.as_materialized_series();
        if let DataType::Struct(_) = s.dtype() {
            for f in s.struct_()?.fields_as_series() {
                out.push(OutColumn {
                    name: format!("{}.{}", s.name(), f.name()),
                    cells: cells(&f)?,
                    numeric: f.dtype().is_primitive_numeric(),
                });
            }
        } else {
            out.push(OutColumn {
                name: s.name().to_string(),
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

/// The rows of `df` as JSON lines: each the object `--format json` prints for it, on one line.
pub fn json_lines(df: &DataFrame) -> anyhow::Result<String> {
    let mut out = String::new();
    for item in dexlake::query::json_rows(df)? {
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
    if format == Format::Json {
        let mut out = serde_json::to_string_pretty(&dexlake::query::json_rows(df)?)?;
        out.push('\n');
        return Ok(out.into_bytes());
    }
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
        Format::Json => anyhow::bail!("JSON is written before the text formats"),
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
pub fn write(
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
}
