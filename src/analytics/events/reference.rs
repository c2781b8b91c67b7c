//! The reference reader of the tests: each file through a polars query (scan, filters,
//! select), then its rows to events. Simpler than the row-group reader, and compared with it.

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

use super::layout::Layout;
use super::memory::{TokenMap, rows_to_events};
use super::{EventSource, Events, Selection, TimeRange, TokenEvents, TokenSet, selected_files};
use crate::lake::cols::{event, swap, trade};
use crate::lake::read::scan_files;
use crate::lake::{FileEntry, Lake};
use crate::{Error, Result};

/// Stack of a reader thread (polars' query execution recurses deeply in debug builds).
const READER_STACK: usize = 64 << 20;

/// Predicates above this many tokens are applied after reading instead of in the scan.
const MAX_PUSHED_TOKENS: usize = 64;

/// A `block_time` literal of the lake's type.
fn time_lit(t: DateTime<Utc>) -> Expr {
    lit(t.timestamp_micros()).cast(DataType::Datetime(
        TimeUnit::Microseconds,
        Some(TimeZone::UTC),
    ))
}

/// The token side of the selected events of one Parquet file, by token (unsorted).
fn read_file(
    lake: &Lake,
    file: &(String, FileEntry),
    source: EventSource,
    selection: &Selection,
    wanted: Option<&TokenSet<'_>>,
    range: TimeRange,
) -> Result<TokenMap<Events>> {
    let mut lf = scan_files(lake.base(), source.dataset(), [(&file.0, &file.1)])?;
    if let Some(from) = range.from {
        lf = lf.filter(col(event::BLOCK_TIME).gt_eq(time_lit(from)));
    }
    if let Some(to) = range.to {
        lf = lf.filter(col(event::BLOCK_TIME).lt(time_lit(to)));
    }
    let token_cols: &[&str] = match source {
        EventSource::Swaps => &[swap::TOKEN_IN, swap::TOKEN_OUT],
        EventSource::Trades => &[trade::TOKEN],
    };
    if let Some(w) = wanted
        && w.len() <= MAX_PUSHED_TOKENS
    {
        let mut names: Vec<&&str> = w.iter().collect();
        names.sort();
        let pred = names
            .iter()
            .flat_map(|t| token_cols.iter().map(move |c| col(*c).eq(lit(**t))))
            .reduce(Expr::or)
            .unwrap_or_else(|| lit(false));
        lf = lf.filter(pred);
    }
    if let Selection::Pool(p) = selection {
        lf = lf.filter(col(swap::POOL).eq(lit(p.as_str())));
    }
    // The columns the row-group reader reads in its two passes.
    let layout = Layout::of(source);
    let cols: Vec<&str> = layout
        .side_columns()
        .into_iter()
        .chain(layout.number_columns())
        .collect();
    let df = lf
        .select(cols.iter().map(|c| col(*c)).collect::<Vec<_>>())
        .collect()
        .map_err(Error::polars("reading events"))?;
    // Each token's columns are allocated at their final size: no spare capacity is held.
    rows_to_events(&df, source, wanted)
}

/// [`load_events`](super::load_events) through a polars query per file: the simpler reader,
/// the row-group reader's reference in the tests.
pub(super) fn load_events(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
) -> Result<Vec<TokenEvents>> {
    let (files, wanted) = selected_files(lake, source, selection, range)?;
    // A few reader threads, each one file at a time: only the compact event columns outlive a
    // file's frame. They are plain threads with large stacks, not rayon workers: a polars query
    // started from a rayon worker can exhaust its stack.
    let read = |k: usize, every: usize| -> Result<Vec<TokenMap<Events>>> {
        files
            .iter()
            .skip(k)
            .step_by(every)
            .map(|file| read_file(lake, file, source, selection, wanted.as_ref(), range))
            .collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(files.len().max(1));
    let parts: Vec<Result<Vec<TokenMap<Events>>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                std::thread::Builder::new()
                    .name(format!("dexlake-read-{k}"))
                    .stack_size(READER_STACK)
                    .spawn_scoped(scope, move || read(k, threads))
            })
            .collect();
        if handles.iter().any(std::io::Result::is_err) {
            // No thread could be started: read on this one.
            return vec![read(0, 1)];
        }
        handles
            .into_iter()
            .flatten()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut by_token: TokenMap<Vec<Events>> = TokenMap::default();
    for part in parts {
        for map in part? {
            for (token, events) in map {
                by_token.entry(token).or_default().push(events);
            }
        }
    }
    let mut out: Vec<TokenEvents> = by_token
        .into_par_iter()
        .map(|(token, mut chunks)| {
            // Files hold rows in event order and usually cover disjoint times: in the order of
            // their first events the chunks are mostly already sorted, and `sort` finds out.
            chunks.sort_by_key(|c| (!c.is_empty()).then(|| c.key(0)));
            let mut events = Events::concat(chunks);
            events.sort();
            TokenEvents { token, events }
        })
        .collect();
    out.sort_by(|a, b| a.token.cmp(&b.token));
    Ok(out)
}
