//! The reference reader of the tests: each file through a polars query (scan, filters,
//! select), then its rows to events. Simpler than the row-group reader, and compared with it.

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

use super::layout::{Layout, NO_SIDE, SwapRows, token_sides};
use super::{
    EventSource, Events, Selection, Tick, TimeRange, TokenEvents, TokenSet, selected_files,
};
use crate::analytics::columns::{f64_col, i64_col, micros_col, str_col};
use crate::lake::cols::{event, swap, trade};
use crate::lake::read::scan_files;
use crate::lake::{FileEntry, Lake};
use crate::{Error, Result};

/// Events by token address.
type TokenMap<V> = PlHashMap<String, V>;

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

/// Token sides of the rows of one file: each side's token as a small index into the file's
/// distinct tokens, so a token's name is hashed once per row and allocated once per file.
struct FileTokens<'a> {
    /// Distinct tokens of the file, by index.
    names: Vec<&'a str>,
    index: PlHashMap<&'a str, u32>,
    /// Events per token index.
    counts: Vec<usize>,
}

impl<'a> FileTokens<'a> {
    fn new() -> Self {
        FileTokens {
            names: Vec::new(),
            index: PlHashMap::default(),
            counts: Vec::new(),
        }
    }

    /// The index of `token`, counting one more event for it.
    fn count(&mut self, token: &'a str) -> u32 {
        let k = match self.index.get(token) {
            Some(&k) => k,
            None => {
                let k = u32::try_from(self.names.len()).expect("fewer than 2^32 tokens per file");
                self.names.push(token);
                self.counts.push(0);
                self.index.insert(token, k);
                k
            }
        };
        self.counts[k as usize] += 1;
        k
    }

    /// Empty event columns sized for each token's events.
    fn columns(&self) -> Vec<Events> {
        self.counts
            .iter()
            .map(|&n| Events {
                time: Vec::with_capacity(n),
                slot: Vec::with_capacity(n),
                id: Vec::with_capacity(n),
                price: Vec::with_capacity(n),
                base: Vec::with_capacity(n),
                usd: Vec::with_capacity(n),
                buy: Vec::with_capacity(n),
            })
            .collect()
    }

    /// The filled columns by token name.
    fn into_map(self, columns: Vec<Events>) -> TokenMap<Events> {
        self.names
            .into_iter()
            .map(str::to_owned)
            .zip(columns)
            .collect()
    }
}

/// The token side of each row of a frame of swaps or trades, by token. A first pass finds each
/// row's token sides and counts the events per token, a second one fills columns allocated at
/// their final size.
fn rows_to_events(
    df: &DataFrame,
    source: EventSource,
    wanted: Option<&TokenSet<'_>>,
) -> Result<TokenMap<Events>> {
    let time = micros_col(df, event::BLOCK_TIME)?;
    let slot = i64_col(df, event::BLOCK_SLOT)?;
    let id = i64_col(df, event::ID)?;
    let keep = |t: &str| wanted.is_none_or(|w| w.contains(t));
    let mut sides = FileTokens::new();
    let mut columns;
    match source {
        EventSource::Swaps => {
            let kind = str_col(df, event::SWAP_TYPE)?;
            let t_in = str_col(df, swap::TOKEN_IN)?;
            let t_out = str_col(df, swap::TOKEN_OUT)?;
            // The token of each row's bought (`out`) and sold (`in`) side, or NO_SIDE.
            let mut outs = Vec::with_capacity(df.height());
            let mut ins = Vec::with_capacity(df.height());
            for ((k, ti), to) in kind.iter().zip(t_in.iter()).zip(t_out.iter()) {
                let (k, ti, to) = (*k, *ti, *to);
                let (side_out, side_in) = match wanted {
                    Some(w) => (w.contains(to), w.contains(ti)),
                    None => token_sides(k),
                };
                outs.push(if side_out { sides.count(to) } else { NO_SIDE });
                ins.push(if side_in { sides.count(ti) } else { NO_SIDE });
            }
            columns = sides.columns();
            let (a_in, a_out) = (
                f64_col(df, swap::AMOUNT_IN)?,
                f64_col(df, swap::AMOUNT_OUT)?,
            );
            let (p_in, p_out) = (f64_col(df, swap::PRICE_IN)?, f64_col(df, swap::PRICE_OUT)?);
            let (u_in, u_out) = (f64_col(df, swap::USD_IN)?, f64_col(df, swap::USD_OUT)?);
            let rows = SwapRows {
                time: &time,
                slot: &slot,
                id: &id,
                amount_in: &a_in,
                amount_out: &a_out,
                price_in: &p_in,
                price_out: &p_out,
                usd_in: &u_in,
                usd_out: &u_out,
            };
            for (i, (&o, &n)) in outs.iter().zip(&ins).enumerate() {
                if o != NO_SIDE {
                    columns[o as usize].push(rows.tick(i, true));
                }
                if n != NO_SIDE {
                    columns[n as usize].push(rows.tick(i, false));
                }
            }
        }
        EventSource::Trades => {
            let token = str_col(df, trade::TOKEN)?;
            let dir = str_col(df, trade::DIRECTION)?;
            let tokens: Vec<u32> = token
                .iter()
                .map(|t| {
                    let t = *t;
                    if keep(t) { sides.count(t) } else { NO_SIDE }
                })
                .collect();
            columns = sides.columns();
            let (amount, price, usd) = (
                f64_col(df, trade::AMOUNT)?,
                f64_col(df, trade::PRICE)?,
                f64_col(df, trade::USD)?,
            );
            for (i, (&t, d)) in tokens.iter().zip(dir.iter()).enumerate() {
                if t == NO_SIDE {
                    continue;
                }
                columns[t as usize].push(Tick {
                    time: time[i],
                    slot: slot[i],
                    id: id[i],
                    price: price[i],
                    base: amount[i],
                    usd: usd[i],
                    buy: *d == "buy",
                });
            }
        }
    }
    Ok(sides.into_map(columns))
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
