//! Output of result frames, shared by the commands that print them: aligned text, CSV, JSON
//! (struct columns as nested objects) and Parquet.
//!
//! Struct columns are flattened to `parent.child` columns in text and CSV. Times are RFC 3339
//! in UTC (`Z`); a non-finite number is written as its text (`inf`, `NaN`), nulls as empty
//! cells or JSON `null`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chrono::DateTime;
use clap::{Args, ValueEnum};
use dexlake::lake::Lake;
use polars::io::parquet::write::{StatisticsOptions, get_encodings};
use polars::prelude::*;
use polars_parquet::write::{
    CompressedPage, CompressionOptions, Encoding, Version, WriteOptions, array_to_columns, compress,
};
use rayon::prelude::*;
use serde_json::{Map, Value};

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
}

impl Output {
    /// Writes `df` as these flags ask.
    pub fn emit(&self, df: DataFrame) -> anyhow::Result<ExitCode> {
        emit(df, self.format, self.out.as_deref())
    }
}

/// Prints an answer's warnings on stderr, one line each after `warning: ` or `note: `.
pub fn warn(warnings: &[dexlake::query::Warning]) {
    for w in warnings {
        eprintln!("{}: {}", w.kind.prefix(), w.text);
    }
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
/// and its cells.
struct OutColumn {
    name: String,
    path: Vec<String>,
    cells: Vec<Value>,
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
                });
            }
        } else {
            out.push(OutColumn {
                name: s.name().to_string(),
                path: vec![s.name().to_string()],
                cells: cells(s)?,
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

/// The rows of `df` as the aligned table `--format table` prints.
pub fn table_lines(df: &DataFrame) -> anyhow::Result<String> {
    Ok(String::from_utf8(render(df, Format::Table)?)?)
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
            let w = cols.iter().map(|c| c.name.len()).max().unwrap_or(0);
            for r in 0..rows {
                if r > 0 {
                    out.push('\n');
                }
                for c in &cols {
                    out.push_str(&format!("{:w$}  {}\n", c.name, text(&c.cells[r])));
                }
            }
        }
        Format::Table => {
            let texts: Vec<Vec<String>> = cols
                .iter()
                .map(|c| c.cells.iter().map(text).collect())
                .collect();
            let widths: Vec<usize> = cols
                .iter()
                .zip(&texts)
                .map(|(c, t)| {
                    t.iter()
                        .map(String::len)
                        .max()
                        .unwrap_or(0)
                        .max(c.name.len())
                })
                .collect();
            let line = |cells: Vec<&str>| -> String {
                let parts: Vec<String> = cells
                    .iter()
                    .zip(&widths)
                    .map(|(s, w)| format!("{s:w$}"))
                    .collect();
                format!("{}\n", parts.join("  ").trim_end())
            };
            out.push_str(&line(cols.iter().map(|c| c.name.as_str()).collect()));
            for r in 0..rows {
                out.push_str(&line(texts.iter().map(|t| t[r].as_str()).collect()));
            }
        }
        Format::Parquet => anyhow::bail!("Parquet output is written by `emit`, not rendered"),
    }
    Ok(out.into_bytes())
}

pub fn emit(mut df: DataFrame, format: Format, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    if format == Format::Parquet {
        let path = out.context("--format parquet needs --out FILE")?;
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let written = parquet_writer(file)?.finish(&mut df);
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

    pub fn finish(self) -> anyhow::Result<()> {
        if let Some(w) = self.writer {
            anyhow::Context::with_context(w.finish(), || {
                format!("writing {}", self.path.display())
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        sink.finish().unwrap();
        let back = ParquetReader::new(File::open(path).unwrap())
            .finish()
            .unwrap();
        let mut all = frames[0].clone();
        for f in &frames[1..] {
            all.vstack_mut(f).unwrap();
        }
        (back, all)
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
