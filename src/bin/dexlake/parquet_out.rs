//! Parquet output: the writer options of the CLI's Parquet files (zstd level, page options,
//! runs written as dictionaries) and [`ParquetSink`], which streams an answer's batches to one
//! file with its provenance in the footer.

use std::fs::File;
use std::path::Path;

use anyhow::Context;
use polars::io::parquet::write::{StatisticsOptions, get_encodings};
use polars::prelude::*;
use polars_parquet::write::{
    CompressedPage, CompressionOptions, Encoding, KeyValue, Version, WriteOptions,
    array_to_columns, compress, schema_to_metadata_key,
};
use rayon::prelude::*;

/// The zstd level of the CLI's Parquet output: on 4 M bars, level 1 writes 2 % more bytes than
/// polars' default level 3 in three quarters of the time (BENCHMARKS.md, "Analytics: OHLCV
/// bars").
const ZSTD_LEVEL: i32 = 1;

pub fn parquet_writer(file: File) -> anyhow::Result<ParquetWriter<File>> {
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
    use crate::output::{Format, write};

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
