//! `verify --repair`: a new manifest from the data files on disk, for a lake whose manifest is
//! missing or damaged, or whose log lost an entry.
//!
//! Each file under a dataset folder is adopted when its path is a data file path of the layout
//! and the file is readable Parquet whose key-value metadata names the dataset of its folder;
//! its rows, size and time range are read from the file. Everything else is left out and
//! reported, never deleted. Files the readable parts of the log say a commit replaced
//! (retained for old versions) are not adopted: their rows are in the files that replaced
//! them; the new manifest keeps them as retained files until the next vacuum. The sync state
//! (cursors, covered ranges) is the newest one still readable: the newest checkpoint whose
//! state parses (else the one before it), then every log entry after it that can be read, in order, skipping those that are missing or damaged (see
//! [`log::salvage_state`]). Every commit it includes had its files written first, so it claims
//! no more than the files hold; a key only a skipped entry set keeps its older value, and a sync
//! re-fetches the difference (de-duplicated by natural key). Without it the state is empty and
//! the next sync fetches everything again, adding nothing twice. The rebuilt manifest is a new
//! checkpoint, numbered after every version the log names, so the log is continuous again from
//! it and no later commit can reuse a version an old entry holds.
//!
//! A lost log entry is repaired the same way rather than by folding the surviving entries onto
//! the checkpoint: the lost entry's added files are on disk but named by no surviving entry, and
//! the files it removed (by compaction) are gone from disk but still named by the checkpoint or
//! an earlier entry, so only the files on disk give the committed file list. What cannot be
//! recovered: the state values only the lost entry set; as in every repair, the files' id
//! ranges (writes then read those files' ids instead of skipping them by range); and which
//! files a lost entry removed, when no surviving checkpoint or entry names them: such a
//! retained file is adopted beside the files that replaced it, and `verify` then reports the
//! repeated ids (`dexlake vacuum` before a repair, when the log is still readable, leaves none).

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::RecordBatchReader;
use arrow_schema::{DataType, TimeUnit};
use arrow_select::concat::concat_batches;
use bytes::Bytes;
use chrono::Utc;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::layout::Partition;
use crate::lake::log::{self, FileEntry, MANIFEST_FORMAT_VERSION, Manifest};
use crate::lake::schema::{DATASET_KEY, SCHEMA_VERSION_KEY};
use crate::lake::write::batch::time_range;
use crate::{Error, Result};

/// What [`Lake::repair`](crate::lake::Lake::repair) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Whether a manifest was rebuilt; `false` when the manifest was sound and left as it was.
    pub rebuilt: bool,
    /// Version of the manifest now in place.
    pub version: u64,
    /// Data files the new manifest lists.
    pub files: usize,
    /// Rows the new manifest lists, per dataset.
    pub rows: BTreeMap<Dataset, u64>,
    /// Whether a sync state was salvaged from the damaged manifest (its newest readable
    /// version).
    pub state_from_previous: bool,
    /// Files the readable log says commits replaced: not adopted, and kept as retained files
    /// (deleted by the next vacuum).
    pub retained: usize,
    /// Files under the dataset folders that were not adopted, with the reason; they are left
    /// on disk.
    pub left_out: Vec<(String, String)>,
}

/// Runs [`Lake::repair`](crate::lake::Lake::repair) under the writer lock.
pub(crate) fn repair(lake: &Base) -> Result<RepairReport> {
    let _lock = lake.lock()?;
    let store = lake.store();
    // A sound manifest is never replaced; what is wrong with it is `verify`'s to report.
    if let Ok(m) = Manifest::load(store) {
        return Ok(RepairReport {
            version: m.version,
            files: m.files.len(),
            rows: rows_of(&m),
            ..RepairReport::default()
        });
    }
    // Files an interrupted compaction had replaced hold rows its new files also hold.
    let journal = log::read_journal(store)?;
    let interrupted: BTreeSet<&String> = journal.iter().flat_map(|j| &j.remove).collect();
    // Files committed ones replaced, retained for old versions until a vacuum.
    let retained = log::salvage_removed(store);
    let salvaged = log::salvage_state(store);

    let mut report = RepairReport {
        rebuilt: true,
        ..RepairReport::default()
    };
    let mut files = BTreeMap::new();
    let mut removed = BTreeMap::new();
    for dataset in Dataset::ALL {
        for path in store.list(dataset.name())? {
            let name = path.rsplit('/').next().unwrap_or_default();
            let verdict = if name.starts_with('.') {
                Err("a temporary file of an interrupted write".to_owned())
            } else if interrupted.contains(&path) {
                Err(
                    "replaced by an interrupted compaction whose new files hold its rows"
                        .to_owned(),
                )
            } else if retained.contains(&path) {
                removed.insert(path, 0);
                continue;
            } else {
                adopt(lake, &path)
            };
            match verdict {
                Ok(entry) => {
                    files.insert(path, entry);
                }
                Err(why) => report.left_out.push((path, why)),
            }
        }
    }
    let version = log::newest_named_version(store)?
        .max(salvaged.as_ref().map_or(0, |(v, _)| *v))
        .max(journal.as_ref().map_or(0, |j| j.version))
        + 1;
    report.state_from_previous = salvaged.is_some();
    // The versions before the new base are no longer read (their log is damaged), so the
    // retained files are kept only until the next vacuum.
    for v in removed.values_mut() {
        *v = version;
    }
    report.retained = removed.len();
    let manifest = Manifest {
        format_version: MANIFEST_FORMAT_VERSION,
        version,
        committed_at: Some(Utc::now()),
        files,
        state: salvaged.map(|(_, state)| state).unwrap_or_default(),
        removed,
    };
    // A new base, newer than anything the damaged log names; the damaged parts stay on disk
    // until a later checkpoint's clean-up.
    log::start_over(store, &manifest)?;
    log::clear_journal(store)?;
    report.version = manifest.version;
    report.files = manifest.files.len();
    report.rows = rows_of(&manifest);
    Ok(report)
}

fn rows_of(m: &Manifest) -> BTreeMap<Dataset, u64> {
    let mut rows = BTreeMap::new();
    for entry in m.files.values() {
        *rows.entry(entry.dataset).or_default() += entry.rows;
    }
    rows
}

/// The manifest entry of one data file, or why it cannot be adopted.
fn adopt(lake: &Base, path: &str) -> std::result::Result<FileEntry, String> {
    let partition = Partition::from_file_path(path).map_err(|e| e.to_string())?;
    let dataset = partition.dataset;
    let data = Bytes::from(lake.store().get(path).map_err(|e| e.to_string())?);
    let bytes = data.len() as u64;
    let builder = ParquetRecordBatchReaderBuilder::try_new(data)
        .map_err(|e| format!("not readable as Parquet: {e}"))?;
    let meta = builder.metadata().file_metadata();
    let value = |key: &str| {
        meta.key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == key))
            .and_then(|k| k.value.clone())
    };
    match value(DATASET_KEY) {
        Some(d) if d == dataset.name() => {}
        Some(d) => return Err(format!("written for dataset {d}, found in {dataset}/")),
        None => return Err("not written by dexlake (no dataset in its metadata)".to_owned()),
    }
    let schema_version = value(SCHEMA_VERSION_KEY)
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or("no schema version in its metadata")?;
    let rows = u64::try_from(meta.num_rows()).map_err(|_| "a negative row count".to_owned())?;
    if rows == 0 {
        return Err("holds no rows".to_owned());
    }
    let time = builder
        .schema()
        .index_of(dataset.time_column())
        .map_err(|_| format!("lacks the time column {}", dataset.time_column()))?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), [time]);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(|e| format!("not readable as Parquet: {e}"))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("not readable as Parquet: {e}"))?;
    let batch = concat_batches(&schema, &batches).map_err(|e| e.to_string())?;
    if !matches!(
        batch.column(0).data_type(),
        DataType::Timestamp(TimeUnit::Microsecond, _)
    ) {
        return Err(format!(
            "its time column {} is not a timestamp in microseconds",
            dataset.time_column()
        ));
    }
    let (min_time, max_time) = time_range(dataset, &batch).map_err(|e: Error| e.to_string())?;
    Ok(FileEntry {
        dataset,
        rows,
        bytes,
        min_time,
        max_time,
        schema_version,
        // Without a range the writer reads the file's ids at every write of its dataset.
        min_id: None,
        max_id: None,
    })
}
