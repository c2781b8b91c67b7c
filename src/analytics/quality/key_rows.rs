//! The key columns of a dataset's rows (ids, slots, times), read for the id and slot checks
//! row group by row group with arrow-rs, in parallel, the rows of the named tokens only when
//! the check names some: what `ids.rs` and `slots.rs` group, a pass at a time.

use std::collections::HashSet;

use arrow_array::RecordBatch;
use arrow_array::types::Int64Type;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use rayon::prelude::*;

use crate::Result;
use crate::analytics::arrow_columns::{dictionary, numbers};
use crate::lake::cols::{event, swap, trade};
use crate::lake::read::{SharedFile, committed_files, int_bounds};
use crate::lake::{Dataset, Lake, Partition};

/// The token columns a row of each dataset involves a token by.
fn token_columns(dataset: Dataset) -> &'static [&'static str] {
    match dataset {
        Dataset::Swaps => &[swap::TOKEN_IN, swap::TOKEN_OUT],
        _ => &[trade::TOKEN],
    }
}

/// Files open at once.
const FILES_AT_ONCE: usize = 16;

/// One row group's key columns: the batch, the rows of the named tokens (`None`: every row),
/// and its file's `date` partition as days since the Unix epoch.
pub(super) struct KeyBatch<'a> {
    pub(super) batch: &'a RecordBatch,
    pub(super) keep: Option<&'a [bool]>,
    pub(super) date: i32,
    pub(super) path: &'a str,
}

impl KeyBatch<'_> {
    /// A 64-bit integer or timestamp column (timestamps as microseconds) of the kept rows; a
    /// null reads as `i64::MIN` (the lake's key columns have none).
    pub(super) fn ints(&self, name: &str) -> Result<Vec<i64>> {
        let values = numbers::<Int64Type>(self.batch, name, self.path, i64::MIN)?;
        let values = values.values();
        Ok(match self.keep {
            None => values.to_vec(),
            Some(keep) => values
                .iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|(v, _)| *v)
                .collect(),
        })
    }
}

/// The committed files of a dataset, to read their key columns.
pub(super) struct KeyRows<'a> {
    lake: &'a Lake,
    dataset: Dataset,
    files: Vec<(String, crate::lake::FileEntry, i32)>,
    tokens: Option<HashSet<&'a str>>,
}

impl<'a> KeyRows<'a> {
    /// The committed files of `dataset`, their rows filtered to those involving one of
    /// `tokens` when some are named.
    pub(super) fn of(
        lake: &'a Lake,
        dataset: Dataset,
        tokens: Option<&'a [String]>,
    ) -> Result<KeyRows<'a>> {
        let manifest = lake.manifest()?;
        let files = committed_files(&manifest, dataset, None, None)
            .into_iter()
            .map(|(path, entry)| {
                let date = Partition::from_file_path(&path)?.date;
                let days = (date - chrono::NaiveDate::default()).num_days() as i32;
                Ok((path, entry, days))
            })
            .collect::<Result<_>>()?;
        Ok(KeyRows {
            lake,
            dataset,
            files,
            tokens: tokens.map(|t| t.iter().map(String::as_str).collect()),
        })
    }

    /// Rows of the files, as their manifest entries record them (before any token filter): a
    /// bound of the rows read.
    pub(super) fn committed_rows(&self) -> u64 {
        self.files.iter().map(|(_, e, _)| e.rows).sum()
    }

    /// `map` of every row group's `columns` whose statistics `wanted` does not rule out (from
    /// the footer and the row group's number), in parallel; the results in file and row group
    /// order.
    pub(super) fn map<T: Send>(
        &self,
        columns: &[&str],
        wanted: impl Fn(&ArrowReaderMetadata, usize) -> bool + Sync,
        map: impl Fn(KeyBatch<'_>) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        let token_columns = token_columns(self.dataset);
        let mut read: Vec<&str> = columns.to_vec();
        if self.tokens.is_some() {
            read.extend(token_columns);
        }
        let mut out = Vec::new();
        for window in self.files.chunks(FILES_AT_ONCE) {
            let opened: Vec<(SharedFile, ArrowReaderMetadata)> = window
                .par_iter()
                .map(|(path, entry, _)| {
                    let file = SharedFile::open(self.lake.base(), path, entry)?;
                    let footer = match self.tokens {
                        Some(_) => file.footer_with_dictionaries(token_columns)?,
                        None => file.footer()?,
                    };
                    Ok((file, footer))
                })
                .collect::<Result<_>>()?;
            let groups: Vec<(usize, usize)> = opened
                .iter()
                .enumerate()
                .flat_map(|(k, (_, footer))| {
                    (0..footer.metadata().num_row_groups()).map(move |g| (k, g))
                })
                .filter(|&(k, g)| wanted(&opened[k].1, g))
                .collect();
            let found: Vec<T> = groups
                .par_iter()
                .map(|&(k, g)| {
                    let (file, footer) = &opened[k];
                    let (path, _, date) = &window[k];
                    let batch = file.read_row_group(footer, g, &read)?;
                    let keep = match &self.tokens {
                        None => None,
                        Some(tokens) => Some(involving(&batch, path, token_columns, tokens)?),
                    };
                    map(KeyBatch {
                        batch: &batch,
                        keep: keep.as_deref(),
                        date: *date,
                        path,
                    })
                })
                .collect::<Result<_>>()?;
            out.extend(found);
        }
        Ok(out)
    }
}

/// Whether each row of `batch` involves one of `tokens` in one of `columns`.
fn involving(
    batch: &RecordBatch,
    path: &str,
    columns: &[&str],
    tokens: &HashSet<&str>,
) -> Result<Vec<bool>> {
    let mut keep = vec![false; batch.num_rows()];
    for c in columns {
        let (codes, values) = dictionary(batch, c, path)?;
        let named: Vec<bool> = values
            .names()
            .into_iter()
            .map(|n| tokens.contains(n))
            .collect();
        for (k, &code) in keep.iter_mut().zip(&codes) {
            *k |= named[code as usize];
        }
    }
    Ok(keep)
}

/// The smallest and largest `block_slot` of a row group by its statistics.
pub(super) fn slot_bounds(footer: &ArrowReaderMetadata, group: usize) -> (i64, i64) {
    int_bounds(footer, group, event::BLOCK_SLOT)
}
