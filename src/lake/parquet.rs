//! The Parquet form of a data file: the writer properties every data file is written with
//! (zstd, row groups, page statistics, bloom filters and room for a row group's dictionary on
//! the wallet and token columns of swaps and trades, the schema version and dataset as
//! key-value metadata, the time column as the sort order) and the encoding of a batch in
//! memory. The writer, the streamed files of compaction and the scans' empty frames share them.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use super::cols::{event, swap, trade};
use super::dataset::Dataset;
use super::schema::{self, SCHEMA_VERSION};
use crate::{Error, Result};

/// Default rows per row group, chosen by measurement (`cargo bench --bench convert`, group
/// `row_group_size`: one million swaps over three days, 2 cores). A one-hour time-range query
/// took 3.6 / 4.0 / 6.0 / 5.8 / 7.6 ms and a full scan of four columns 55 / 45 / 43 / 43 / 37 ms
/// at 8Ki / 32Ki / 64Ki / 128Ki / 512Ki rows. Full scans (OHLCV, PnL) are most of the lake's
/// work; 64Ki keeps them within 15 % of the best while a time-range query still skips row
/// groups (at 512Ki a day's file is one row group and only whole files are skipped).
pub const DEFAULT_ROW_GROUP_ROWS: usize = 65_536;

/// The zstd level of files the lake expects to read once more and replace: compaction's
/// intermediate runs, and a commit's small files (fewer rows than
/// [`compact_below_rows`](crate::lake::LakeOptions::compact_below_rows)), which the next
/// merge of their partition rewrites. Fast beats small there: such a file is read once more
/// and deleted (see BENCHMARKS.md, "Fast small files, shared text, parallel compaction"). A
/// commit in a lake whose own level is lower (zstd's negative levels) keeps that.
pub(crate) const TRANSIENT_ZSTD_LEVEL: i32 = 1;

fn arrow_err(context: String) -> impl FnOnce(arrow_schema::ArrowError) -> Error {
    move |source| Error::Arrow { context, source }
}

/// The false-positive rate of the bloom filters of [`bloom_filter_columns`].
const BLOOM_FILTER_FPP: f64 = 0.01;

/// The room of one name in a dictionary page: an address of up to 60 bytes and its 4-byte
/// length.
const NAME_BYTES: usize = 64;

/// The columns whose row groups carry a bloom filter: the wallet and token addresses of swaps
/// and trades.
pub(crate) fn bloom_filter_columns(dataset: Dataset) -> &'static [&'static str] {
    match dataset {
        Dataset::Trades => &[event::WALLET, trade::TOKEN],
        Dataset::Swaps => &[event::WALLET, swap::TOKEN_IN, swap::TOKEN_OUT],
        _ => &[],
    }
}

/// The writer properties of every data file: zstd at `zstd_level`, row groups of
/// `row_group_rows`, page statistics, the schema version and dataset as key-value metadata,
/// and the time column declared as the sort order.
pub(crate) fn writer_properties(
    dataset: Dataset,
    schema: &SchemaRef,
    row_group_rows: usize,
    zstd_level: i32,
) -> Result<WriterProperties> {
    let level = ZstdLevel::try_new(zstd_level).map_err(|source| Error::Parquet {
        path: dataset.name().into(),
        source,
    })?;
    let time_idx = schema
        .index_of(dataset.time_column())
        .map_err(arrow_err(format!("{dataset} time column")))?;
    let mut builder = WriterProperties::builder();
    // The wallet and token columns of swaps and trades get a bloom filter per row group, so a
    // reader looking for one wallet (or token) skips the row groups that cannot hold it: their
    // rows are in time order, so the columns' statistics span nearly every name. Sized for a
    // row group of distinct names, folded down to what the row group holds.
    //
    // Their dictionaries may grow to a row group of distinct names (up to 60 bytes each, with
    // the length): past the writer's default limit (1 MiB, about 20,000 Solana addresses) the
    // rest of the row group would fall back to plain strings, and a reader that reads the
    // column as a dictionary (the PnL's and the bars' readers) would then rebuild one, hashing
    // every row (see BENCHMARKS.md, "Lake: dictionaries of a row group of names").
    let dictionary_bytes = row_group_rows.saturating_mul(NAME_BYTES).max(1 << 20);
    for column in bloom_filter_columns(dataset) {
        let path = ColumnPath::from(*column);
        builder = builder
            .set_column_dictionary_page_size_limit(path.clone(), dictionary_bytes)
            .set_column_bloom_filter_enabled(path.clone(), true)
            .set_column_bloom_filter_fpp(path.clone(), BLOOM_FILTER_FPP)
            .set_column_bloom_filter_max_ndv(path, row_group_rows.max(1) as u64);
    }
    Ok(builder
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_key_value_metadata(Some(vec![
            KeyValue::new(
                schema::SCHEMA_VERSION_KEY.to_owned(),
                SCHEMA_VERSION.to_string(),
            ),
            KeyValue::new(schema::DATASET_KEY.to_owned(), dataset.name().to_owned()),
        ]))
        .set_sorting_columns(Some(vec![SortingColumn {
            column_idx: i32::try_from(time_idx).expect("a schema has fewer than 2^31 columns"),
            descending: false,
            nulls_first: true,
        }]))
        .build())
}

/// Encodes a sorted batch with the file schema into Parquet bytes.
pub fn encode_parquet(
    dataset: Dataset,
    file_batch: &RecordBatch,
    row_group_rows: usize,
    zstd_level: i32,
) -> Result<Vec<u8>> {
    let schema = file_batch.schema();
    let props = writer_properties(dataset, &schema, row_group_rows, zstd_level)?;
    let perr = |source| Error::Parquet {
        path: dataset.name().into(),
        source,
    };
    let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props)).map_err(perr)?;
    writer.write(file_batch).map_err(perr)?;
    writer.into_inner().map_err(perr)
}
