//! The events' reader: row group by row group with arrow-rs, in parallel.
//!
//! Two passes over the row groups, both in parallel: the first reads only the kind (swap type
//! or trade direction) and the token addresses (kept as dictionaries, so a token's name is
//! looked up once per row group, not once per row) and finds each row's token sides; with every
//! token's count known, each token's columns are allocated at their final size, and the second
//! pass reads the numbers and writes each event straight to its place. Within a token, events
//! are laid out in file order, row group order and row order, as concatenating the files would.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};

use arrow_array::RecordBatch;
use arrow_array::types::{Float64Type, Int64Type};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use polars::prelude::PlHashMap;
use rayon::prelude::*;

use super::layout::{Layout, NO_SIDE, SwapRows};
use super::spill;
use super::{EventParts, EventSource, Events, Selection, Tick, TimeRange, TokenEvents, TokenSet};
use crate::Result;
use crate::analytics::arrow_columns::{dictionary, numbers};
use crate::analytics::intern::NameRegistry;
use crate::lake::cols::{event, swap, trade};
use crate::lake::read::{SharedFile, may_hold_times, may_hold_values, time_bounds};
use crate::lake::{FileEntry, Lake};

/// A token the registry has not numbered yet.
const UNSEEN: u32 = u32::MAX - 1;

/// The string columns read as dictionaries (those absent from a file are ignored).
const DICTIONARY_COLUMNS: [&str; 6] = [
    event::SWAP_TYPE,
    swap::TOKEN_IN,
    swap::TOKEN_OUT,
    swap::POOL,
    trade::DIRECTION,
    trade::TOKEN,
];

/// The token sides of one row group: per row, the bought (`out`) and sold (`in`) side as an
/// index into `tokens` (or [`NO_SIDE`]).
#[derive(Default)]
pub(super) struct RowGroupSides {
    outs: Vec<u32>,
    ins: Vec<u32>,
    /// Registry id of each token of the row group.
    pub(super) tokens: Vec<u32>,
    /// Events per token of the row group.
    pub(super) counts: Vec<usize>,
    /// Where each token's events of this row group start in its columns.
    pub(super) starts: Vec<usize>,
}

/// The token sides of one row group (see [`RowGroupSides`]); tokens are numbered in `registry`.
#[allow(clippy::too_many_arguments)]
fn row_group_sides(
    batch: &RecordBatch,
    path: &str,
    layout: &Layout,
    wanted: Option<&TokenSet<'_>>,
    pool: Option<&str>,
    lo: Option<i64>,
    hi: Option<i64>,
    registry: &RwLock<NameRegistry>,
) -> Result<RowGroupSides> {
    let n = batch.num_rows();
    let (kinds, kind_values) = dictionary(batch, layout.kind, path)?;
    let (ins, in_values) = dictionary(batch, layout.token[0], path)?;
    // A trade's one token column serves as both sides: decoded once.
    let other;
    let (outs, out_values) = if layout.token[1] == layout.token[0] {
        (&ins, &in_values)
    } else {
        other = dictionary(batch, layout.token[1], path)?;
        (&other.0, &other.1)
    };
    let (kind_names, in_names, out_names) =
        (kind_values.names(), in_values.names(), out_values.names());
    // Which rows are in the range and of the pool.
    let mut keep: Option<Vec<bool>> = None;
    if lo.is_some() || hi.is_some() {
        let time = numbers::<Int64Type>(batch, event::BLOCK_TIME, path, 0)?;
        keep = Some(
            time.values()
                .iter()
                .map(|&t| lo.is_none_or(|lo| t >= lo) && hi.is_none_or(|hi| t < hi))
                .collect(),
        );
    }
    if let Some(p) = pool {
        let (codes, values) = dictionary(batch, swap::POOL, path)?;
        let is_pool: Vec<bool> = values.names().into_iter().map(|n| n == p).collect();
        let k = keep.get_or_insert_with(|| vec![true; n]);
        for (k, &c) in k.iter_mut().zip(&codes) {
            *k &= is_pool[c as usize];
        }
    }
    // Whether each side can be a token side: by the kind, or by the wanted tokens.
    let (bought, sold): (Vec<bool>, Vec<bool>) =
        kind_names.iter().map(|k| (layout.sides)(k)).unzip();
    let wanted_of = |names: &[&str]| -> Option<Vec<bool>> {
        wanted.map(|w| names.iter().map(|t| w.contains(t)).collect())
    };
    let (want_in, want_out) = (wanted_of(&in_names), wanted_of(&out_names));
    // Each row's sides as codes of their dictionary, and which codes are used.
    let mut side_out = Vec::with_capacity(n);
    let mut side_in = Vec::with_capacity(n);
    let mut used_out = vec![false; out_names.len()];
    let mut used_in = vec![false; in_names.len()];
    for i in 0..n {
        let row = keep.as_ref().is_none_or(|k| k[i]);
        let (k, ti, to) = (kinds[i] as usize, ins[i] as usize, outs[i] as usize);
        let (o, s) = match (&want_out, &want_in) {
            (Some(wo), Some(wi)) if layout.wanted_any_side => (wo[to], wi[ti]),
            (Some(wo), Some(wi)) => (bought[k] && wo[to], sold[k] && wi[ti]),
            _ => (bought[k], sold[k]),
        };
        side_out.push(if row && o {
            used_out[to] = true;
            to as u32
        } else {
            NO_SIDE
        });
        side_in.push(if row && s {
            used_in[ti] = true;
            ti as u32
        } else {
            NO_SIDE
        });
    }
    // The registry id of each used code (a shared lock per row group; the exclusive one only
    // for tokens not seen before), then a local index per distinct token of the row group.
    let lookup = |used: &[bool], names: &[&str], reg: &NameRegistry| -> Vec<u32> {
        used.iter()
            .zip(names)
            .map(|(&u, name)| match u {
                false => NO_SIDE,
                true => reg.get(name).unwrap_or(UNSEEN),
            })
            .collect()
    };
    let (mut out_ids, mut in_ids) = {
        let reg = registry.read().unwrap_or_else(PoisonError::into_inner);
        (
            lookup(&used_out, &out_names, &reg),
            lookup(&used_in, &in_names, &reg),
        )
    };
    if out_ids.contains(&UNSEEN) || in_ids.contains(&UNSEEN) {
        let mut reg = registry.write().unwrap_or_else(PoisonError::into_inner);
        for (ids, names) in [(&mut out_ids, &out_names), (&mut in_ids, &in_names)] {
            for (id, name) in ids.iter_mut().zip(names).filter(|(id, _)| **id == UNSEEN) {
                *id = reg.id(name);
            }
        }
    }
    let mut local: PlHashMap<u32, u32> = PlHashMap::default();
    let mut tokens = Vec::new();
    let mut to_local = |ids: Vec<u32>| -> Vec<u32> {
        ids.into_iter()
            .map(|id| {
                if id == NO_SIDE {
                    return NO_SIDE;
                }
                *local.entry(id).or_insert_with(|| {
                    tokens.push(id);
                    (tokens.len() - 1) as u32
                })
            })
            .collect()
    };
    let (out_local, in_local) = (to_local(out_ids), to_local(in_ids));
    let mut counts = vec![0usize; tokens.len()];
    for (sides, map) in [(&mut side_out, &out_local), (&mut side_in, &in_local)] {
        for s in sides.iter_mut().filter(|s| **s != NO_SIDE) {
            *s = map[*s as usize];
            counts[*s as usize] += 1;
        }
    }
    Ok(RowGroupSides {
        outs: side_out,
        ins: side_in,
        tokens,
        counts,
        starts: Vec::new(),
    })
}

/// What the first pass learns, for the second: the files' footers, every row group's token
/// sides (with where each token's events of it start), the tokens' names and each token's
/// number of events.
struct FirstPass<'f> {
    paths: Vec<&'f str>,
    windows: Vec<std::ops::Range<usize>>,
    footers: Vec<ArrowReaderMetadata>,
    /// Row groups as (file, row group), in file order.
    groups: Vec<(usize, usize)>,
    sides: Vec<RowGroupSides>,
    /// Token names, by registry id.
    names: Vec<String>,
    /// Events per token, by registry id.
    totals: Vec<usize>,
}

/// The first pass over the row groups of `files` (see the module documentation).
#[allow(clippy::too_many_arguments)]
fn first_pass<'f>(
    lake: &Lake,
    files: &'f [(String, FileEntry)],
    layout: &Layout,
    wanted: Option<&TokenSet<'_>>,
    pool: Option<&str>,
    (lo, hi): (Option<i64>, Option<i64>),
    files_at_once: usize,
) -> Result<FirstPass<'f>> {
    let mut side_columns = layout.side_columns();
    if lo.is_some() || hi.is_some() {
        side_columns.push(event::BLOCK_TIME);
    }
    if pool.is_some() {
        side_columns.push(swap::POOL);
    }
    // The token columns whose bloom filters rule row groups out, each once.
    let mut token_columns = layout.token.to_vec();
    token_columns.dedup();
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let registry = RwLock::new(NameRegistry::default());
    // The files are opened a window at a time, for each pass: a lake of many folder files
    // never holds a descriptor per file at once. (On an object store opening sends nothing:
    // the first pass fetches each footer and its columns, the second only its own columns,
    // with the footers kept from the first.)
    let windows: Vec<std::ops::Range<usize>> = (0..paths.len())
        .step_by(files_at_once.max(1))
        .map(|w| w..(w + files_at_once.max(1)).min(paths.len()))
        .collect();
    let mut footers: Vec<ArrowReaderMetadata> = Vec::with_capacity(paths.len());
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut sides: Vec<RowGroupSides> = Vec::new();
    for window in &windows {
        let opened: Vec<(SharedFile, ArrowReaderMetadata)> = window
            .clone()
            .into_par_iter()
            .map(|k| {
                let file = SharedFile::open(lake.base(), paths[k], &files[k].1)?;
                let footer = file.footer_with_dictionaries(&DICTIONARY_COLUMNS)?;
                Ok((file, footer))
            })
            .collect::<Result<_>>()?;
        let first = groups.len();
        for (j, (_, footer)) in opened.iter().enumerate() {
            let k = window.start + j;
            groups.extend((0..footer.metadata().num_row_groups()).map(|g| (k, g)));
        }
        let found: Vec<RowGroupSides> = groups[first..]
            .par_iter()
            .map(|&(k, g)| {
                let (file, footer) = &opened[k - window.start];
                // A row group outside the range by its statistics, or without the tokens
                // asked for by its bloom filters, is not read.
                if !may_hold_times(footer, g, lo, hi) {
                    return Ok(RowGroupSides::default());
                }
                if let Some(w) = wanted
                    && !may_hold_values(file, footer, g, &token_columns, |bloom| {
                        w.iter().any(|t| bloom.check(*t))
                    })?
                {
                    return Ok(RowGroupSides::default());
                }
                let batch = file.read_row_group(footer, g, &side_columns)?;
                row_group_sides(&batch, paths[k], layout, wanted, pool, lo, hi, &registry)
            })
            .collect::<Result<_>>()?;
        sides.extend(found);
        footers.extend(opened.into_iter().map(|(_, footer)| footer));
    }
    let names = registry
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .names;
    // Each token's events of a row group follow those of the row groups before it, in the
    // order of their first times (files usually hold disjoint times, so a token's events are
    // then already in event order and `Events::sort` only checks it).
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&i| {
        let (k, g) = groups[i];
        (time_bounds(&footers[k], g).0, k, g)
    });
    let mut totals = vec![0usize; names.len()];
    for &i in &order {
        let s = &mut sides[i];
        s.starts = s
            .tokens
            .iter()
            .zip(&s.counts)
            .map(|(&t, &c)| {
                let at = totals[t as usize];
                totals[t as usize] += c;
                at
            })
            .collect();
    }
    Ok(FirstPass {
        paths,
        windows,
        footers,
        groups,
        sides,
        names,
        totals,
    })
}

/// One row group's events, grouped by token: the events of local token `l` (the row group's
/// `sides.tokens[l]`) are `events[first[l]..first[l] + sides.counts[l]]`, and go at
/// `sides.starts[l]` in that token's columns.
pub(super) struct RowGroupEvents<'a> {
    pub(super) sides: &'a RowGroupSides,
    pub(super) events: &'a Events,
    pub(super) first: &'a [usize],
}

/// The second pass: reads the numbers of every row group with events of the selection (in
/// parallel), groups its events by token and hands them to `put`. The sides are freed as their
/// row groups are done.
fn second_pass(
    lake: &Lake,
    files: &[(String, FileEntry)],
    layout: &Layout,
    first: &FirstPass<'_>,
    sides: Vec<RowGroupSides>,
    put: impl Fn(RowGroupEvents<'_>) -> Result<()> + Sync,
) -> Result<()> {
    let number_columns = layout.number_columns();
    let FirstPass {
        paths,
        windows,
        footers,
        groups,
        ..
    } = first;
    let mut sides = sides.into_iter();
    let mut at = 0;
    for window in windows {
        let n = groups[at..]
            .iter()
            .take_while(|(k, _)| window.contains(k))
            .count();
        let (window_groups, window_sides): (&[(usize, usize)], Vec<RowGroupSides>) =
            (&groups[at..at + n], sides.by_ref().take(n).collect());
        at += n;
        // Only files with events of the selection are opened again.
        let mut needed = vec![false; window.len()];
        for (&(k, _), s) in window_groups.iter().zip(&window_sides) {
            needed[k - window.start] |= !s.tokens.is_empty();
        }
        let opened: Vec<Option<SharedFile>> = window
            .clone()
            .into_par_iter()
            .map(|k| {
                needed[k - window.start]
                    .then(|| SharedFile::open(lake.base(), paths[k], &files[k].1))
                    .transpose()
            })
            .collect::<Result<_>>()?;
        window_groups
            .par_iter()
            .zip(window_sides.into_par_iter())
            .try_for_each(|(&(k, g), s)| -> Result<()> {
                let Some(file) = opened[k - window.start]
                    .as_ref()
                    .filter(|_| !s.tokens.is_empty())
                else {
                    return Ok(());
                };
                let footer = &footers[k];
                let path = &paths[k];
                let batch = file.read_row_group(footer, g, &number_columns)?;
                let id = numbers::<Int64Type>(&batch, event::ID, path, 0)?;
                let slot = numbers::<Int64Type>(&batch, event::BLOCK_SLOT, path, 0)?;
                let time = numbers::<Int64Type>(&batch, event::BLOCK_TIME, path, 0)?;
                let f = |name: &str| numbers::<Float64Type>(&batch, name, path, f64::NAN);
                let sides = |[i, o]: [&str; 2]| -> Result<_> { Ok((f(i)?, f(o)?)) };
                let (a_in, a_out) = sides(layout.amount)?;
                let (p_in, p_out) = sides(layout.price)?;
                let (u_in, u_out) = sides(layout.usd)?;
                let rows = SwapRows {
                    time: time.values(),
                    slot: slot.values(),
                    id: id.values(),
                    amount_in: a_in.values(),
                    amount_out: a_out.values(),
                    price_in: p_in.values(),
                    price_out: p_out.values(),
                    usd_in: u_in.values(),
                    usd_out: u_out.values(),
                };
                // The row group's events grouped by token here; `put` then takes each token's
                // run to its place.
                let mut local = Events::zeroed(s.counts.iter().sum());
                let mut first = Vec::with_capacity(s.counts.len());
                let mut at = 0;
                for &c in &s.counts {
                    first.push(at);
                    at += c;
                }
                let mut cursor = first.clone();
                let mut place = |l: u32, tick: Tick| {
                    let l = l as usize;
                    local.set(cursor[l], tick);
                    cursor[l] += 1;
                };
                for (i, (&o, &n)) in s.outs.iter().zip(&s.ins).enumerate() {
                    if o != NO_SIDE {
                        place(o, rows.tick(i, true));
                    }
                    if n != NO_SIDE {
                        place(n, rows.tick(i, false));
                    }
                }
                put(RowGroupEvents {
                    sides: &s,
                    events: &local,
                    first: &first,
                })
            })?;
    }
    Ok(())
}

/// The range's bounds in microseconds and the pool of a selection: what both passes filter by.
fn bounds(selection: &Selection, range: TimeRange) -> ((Option<i64>, Option<i64>), Option<&str>) {
    let bounds = (
        range.from.map(|t| t.timestamp_micros()),
        range.to.map(|t| t.timestamp_micros()),
    );
    let pool = match selection {
        Selection::Pool(p) => Some(p.as_str()),
        _ => None,
    };
    (bounds, pool)
}

/// Each token's sorted columns and name, by token address.
pub(super) fn by_address(tokens: Vec<(String, Events)>) -> Vec<TokenEvents> {
    let mut out: Vec<TokenEvents> = tokens
        .into_par_iter()
        .map(|(token, mut events)| {
            events.sort();
            TokenEvents { token, events }
        })
        .collect();
    out.sort_by(|a, b| a.token.cmp(&b.token));
    out
}

/// The token side of the selected swaps or trades in `range` from the committed data files
/// `files` (store paths, sorted, with their manifest entries), by token in address order, each
/// in event order; `files_at_once` files are open at a time in each pass.
pub(super) fn read(
    lake: &Lake,
    files: &[(String, FileEntry)],
    source: EventSource,
    selection: &Selection,
    wanted: Option<&TokenSet<'_>>,
    range: TimeRange,
    files_at_once: usize,
) -> Result<Vec<TokenEvents>> {
    let (bounds, pool) = bounds(selection, range);
    let layout = Layout::of(source);
    let first = first_pass(lake, files, layout, wanted, pool, bounds, files_at_once)?;
    gather(lake, files, layout, first)
}

/// The second pass into every token's columns, allocated at their final size.
fn gather(
    lake: &Lake,
    files: &[(String, FileEntry)],
    layout: &Layout,
    mut first: FirstPass<'_>,
) -> Result<Vec<TokenEvents>> {
    let sides = std::mem::take(&mut first.sides);
    let columns: Vec<Mutex<Events>> = first
        .totals
        .par_iter()
        .map(|&n| Mutex::new(Events::zeroed(n)))
        .collect();
    second_pass(lake, files, layout, &first, sides, |rg| {
        for (l, &t) in rg.sides.tokens.iter().enumerate() {
            let mut dest = columns[t as usize]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            dest.copy_from(
                rg.sides.starts[l],
                rg.events,
                rg.first[l],
                rg.sides.counts[l],
            );
        }
        Ok(())
    })?;
    let columns = columns
        .into_iter()
        .map(|c| c.into_inner().unwrap_or_else(PoisonError::into_inner));
    Ok(by_address(first.names.into_iter().zip(columns).collect()))
}

/// [`read`] in parts of at most `events_at_once` events (a token with more is a part alone),
/// in address order, each part's tokens in address order (see [`super::EventParts`]). With one
/// part it is [`read`]. With more, the second pass deals each row group's events to a spill
/// file per part (`spill.rs`), in the system's temporary folder, and each part is read back
/// when asked for: the files are read once, and memory holds the first pass's sides (8 bytes a
/// row, freed as the second pass goes) and then one part.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_in_parts(
    lake: &Lake,
    files: &[(String, FileEntry)],
    source: EventSource,
    selection: &Selection,
    wanted: Option<&TokenSet<'_>>,
    range: TimeRange,
    files_at_once: usize,
    events_at_once: usize,
) -> Result<EventParts> {
    let (bounds, pool) = bounds(selection, range);
    let layout = Layout::of(source);
    let mut first = first_pass(lake, files, layout, wanted, pool, bounds, files_at_once)?;
    let parts = spill::Parts::of(&first.names, &first.totals, events_at_once);
    if parts.len() <= 1 {
        // One part: read as a whole, without spilling.
        let tokens = gather(lake, files, layout, first)?;
        return Ok(EventParts::whole(tokens));
    }
    let spill = spill::Spill::new(&parts)?;
    let latest = AtomicI64::new(i64::MIN);
    let sides = std::mem::take(&mut first.sides);
    second_pass(lake, files, layout, &first, sides, |rg| {
        if let Some(&t) = rg.events.time.iter().max() {
            latest.fetch_max(t, Ordering::Relaxed);
        }
        spill.write(&parts, rg)
    })?;
    let latest = latest.into_inner();
    crate::analytics::spill_files::release_free_memory();
    Ok(EventParts::spilled(
        spill.finish(parts, first.names, first.totals)?,
        (latest > i64::MIN).then_some(latest),
    ))
}
