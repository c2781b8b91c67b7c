//! Loading the token side of swaps or trades from the lake, per token, in event order.
//!
//! A swap has two sides; the *token side* is the one whose asset is the token being priced:
//! - with named tokens (or a pool and a token), the side whose address is one of them;
//! - for every token (or a pool alone), the bought side of a `quote_token` swap, the sold side
//!   of a `token_quote` swap, and both sides of a `token_token` swap; `quote_quote` swaps and
//!   swap types this version does not know carry no token side and are left out.
//!
//! The event's price is that side's `token_price_*`, its base amount `token_amount_*` and its
//! USD amount `usd_amount_*`; it is a buy when the side is the bought one (`*_out`). A trade is
//! already one side: `token_price`, `token_amount`, `usd_amount`, `direction == "buy"`.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray, RecordBatch};
use arrow::datatypes::{
    DataType as ArrowType, Float64Type, Int32Type, Int64Type, TimeUnit as ArrowUnit,
};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

use crate::lake::read::{SharedFile, scan_files};
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// Which dataset the events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventSource {
    /// Swaps (`swaps` dataset): the token side of each swap.
    #[default]
    Swaps,
    /// Trades (`trades` dataset): one event per trade.
    Trades,
}

impl EventSource {
    /// The lake dataset read.
    pub fn dataset(self) -> Dataset {
        match self {
            EventSource::Swaps => Dataset::Swaps,
            EventSource::Trades => Dataset::Trades,
        }
    }
}

/// Which events to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// One token's events.
    Token(String),
    /// The events of each of these tokens.
    Tokens(Vec<String>),
    /// The swaps of one pool (swaps only), grouped by the token they price.
    Pool(String),
    /// Every token of the dataset.
    AllTokens,
}

/// A half-open time range `[from, to)`; an open side is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    /// First instant included.
    pub from: Option<DateTime<Utc>>,
    /// First instant excluded.
    pub to: Option<DateTime<Utc>>,
}

impl TimeRange {
    /// Checks that the range is not empty.
    pub fn validate(&self) -> Result<()> {
        if let (Some(f), Some(t)) = (self.from, self.to)
            && f >= t
        {
            return Err(Error::InvalidArgument {
                argument: "time range".into(),
                reason: format!("`from` {f} is not before `to` {t}: the range is empty"),
            });
        }
        Ok(())
    }
}

/// One event, as the kernels see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    /// Block time, microseconds since the Unix epoch (UTC).
    pub time: i64,
    /// Slot or block number.
    pub slot: i64,
    /// The event's id.
    pub id: i64,
    /// The token's USD price.
    pub price: f64,
    /// Token (base) amount.
    pub base: f64,
    /// USD amount.
    pub usd: f64,
    /// True when the token was bought.
    pub buy: bool,
}

/// A token's events as columns, sorted in event order `(time, slot, id)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Events {
    /// Block time, microseconds since the Unix epoch.
    pub time: Vec<i64>,
    /// Slot or block number.
    pub slot: Vec<i64>,
    /// Event id.
    pub id: Vec<i64>,
    /// USD price of the token.
    pub price: Vec<f64>,
    /// Token amount.
    pub base: Vec<f64>,
    /// USD amount.
    pub usd: Vec<f64>,
    /// Whether the token was bought.
    pub buy: Vec<bool>,
}

impl Events {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.time.len()
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.time.is_empty()
    }

    fn push(&mut self, t: Tick) {
        self.time.push(t.time);
        self.slot.push(t.slot);
        self.id.push(t.id);
        self.price.push(t.price);
        self.base.push(t.base);
        self.usd.push(t.usd);
        self.buy.push(t.buy);
    }

    /// `n` events of zeros (zeroed allocations: large columns get pages of zeros from the
    /// system, mapped when first written).
    fn zeroed(n: usize) -> Events {
        Events {
            time: vec![0; n],
            slot: vec![0; n],
            id: vec![0; n],
            price: vec![0.0; n],
            base: vec![0.0; n],
            usd: vec![0.0; n],
            buy: vec![false; n],
        }
    }

    /// Overwrites the event at `i`.
    #[inline]
    fn set(&mut self, i: usize, t: Tick) {
        self.time[i] = t.time;
        self.slot[i] = t.slot;
        self.id[i] = t.id;
        self.price[i] = t.price;
        self.base[i] = t.base;
        self.usd[i] = t.usd;
        self.buy[i] = t.buy;
    }

    /// Overwrites the `n` events from `at` with those of `src` from `from`.
    fn copy_from(&mut self, at: usize, src: &Events, from: usize, n: usize) {
        fn copy<T: Copy>(to: &mut [T], at: usize, src: &[T], from: usize, n: usize) {
            to[at..at + n].copy_from_slice(&src[from..from + n]);
        }
        copy(&mut self.time, at, &src.time, from, n);
        copy(&mut self.slot, at, &src.slot, from, n);
        copy(&mut self.id, at, &src.id, from, n);
        copy(&mut self.price, at, &src.price, from, n);
        copy(&mut self.base, at, &src.base, from, n);
        copy(&mut self.usd, at, &src.usd, from, n);
        copy(&mut self.buy, at, &src.buy, from, n);
    }

    /// The event at `i`.
    pub fn tick(&self, i: usize) -> Tick {
        Tick {
            time: self.time[i],
            slot: self.slot[i],
            id: self.id[i],
            price: self.price[i],
            base: self.base[i],
            usd: self.usd[i],
            buy: self.buy[i],
        }
    }

    /// Concatenates chunks (in the given order, not sorted), one column at a time, freeing
    /// each chunk's column as it is copied: at most one column more than the chunks is held.
    pub fn concat(mut chunks: Vec<Events>) -> Events {
        if chunks.len() == 1 {
            return chunks.pop().unwrap_or_default();
        }
        fn join<T>(chunks: &mut [Events], column: impl Fn(&mut Events) -> &mut Vec<T>) -> Vec<T> {
            let n = chunks.iter_mut().map(|c| column(c).len()).sum();
            let mut out = Vec::with_capacity(n);
            for c in chunks {
                out.append(&mut std::mem::take(column(c)));
            }
            out
        }
        Events {
            time: join(&mut chunks, |c| &mut c.time),
            slot: join(&mut chunks, |c| &mut c.slot),
            id: join(&mut chunks, |c| &mut c.id),
            price: join(&mut chunks, |c| &mut c.price),
            base: join(&mut chunks, |c| &mut c.base),
            usd: join(&mut chunks, |c| &mut c.usd),
            buy: join(&mut chunks, |c| &mut c.buy),
        }
    }

    /// Builds the columns from events in any order, sorting them into event order.
    pub fn from_ticks(ticks: impl IntoIterator<Item = Tick>) -> Events {
        let mut e = Events::default();
        for t in ticks {
            e.push(t);
        }
        e.sort();
        e
    }

    fn key(&self, i: usize) -> (i64, i64, i64) {
        (self.time[i], self.slot[i], self.id[i])
    }

    /// Sorts the events into event order `(time, slot, id)`; a no-op when they already are.
    pub fn sort(&mut self) {
        let n = self.len();
        if (1..n).all(|i| self.key(i - 1) <= self.key(i)) {
            return;
        }
        let mut perm: Vec<u32> = (0..n as u32).collect();
        perm.sort_unstable_by_key(|&i| self.key(i as usize));
        // One column at a time, so at most one column is held twice.
        fn gather<T: Copy>(v: &mut Vec<T>, perm: &[u32]) {
            *v = perm.iter().map(|&i| v[i as usize]).collect();
        }
        gather(&mut self.time, &perm);
        gather(&mut self.slot, &perm);
        gather(&mut self.id, &perm);
        gather(&mut self.price, &perm);
        gather(&mut self.base, &perm);
        gather(&mut self.usd, &perm);
        gather(&mut self.buy, &perm);
    }
}

/// The events of one token.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenEvents {
    /// Token address.
    pub token: String,
    /// Its events in event order.
    pub events: Events,
}

/// A fast hasher for token addresses, looked up once per row. Addresses come from the lake the
/// user synced, so resistance to crafted collisions is not needed; result order never depends
/// on it (tokens are sorted by address).
#[derive(Default)]
struct TokenHasher(u64);

impl Hasher for TokenHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("chunks of 8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Fast = BuildHasherDefault<TokenHasher>;
type TokenMap<V> = HashMap<String, V, Fast>;
type TokenSet<'a> = HashSet<&'a str, Fast>;

/// Stack of a reader thread (polars' query execution recurses deeply in debug builds).
const READER_STACK: usize = 64 << 20;

/// Predicates above this many tokens are applied after reading instead of in the scan.
const MAX_PUSHED_TOKENS: usize = 64;

/// A `block_time` literal of the lake's type.
pub(crate) fn time_lit(t: DateTime<Utc>) -> Expr {
    lit(t.timestamp_micros()).cast(DataType::Datetime(
        TimeUnit::Microseconds,
        Some(TimeZone::UTC),
    ))
}

/// Microseconds of a datetime column of any unit.
fn micros(c: &Column) -> Result<Vec<i64>> {
    let ca = c.datetime().map_err(Error::polars("reading block_time"))?;
    let mut v = values(ca.physical(), 0);
    match ca.time_unit() {
        TimeUnit::Nanoseconds => v.iter_mut().for_each(|x| *x = x.div_euclid(1000)),
        TimeUnit::Microseconds => {}
        TimeUnit::Milliseconds => v.iter_mut().for_each(|x| *x *= 1000),
    }
    Ok(v)
}

fn strs<'a>(df: &'a DataFrame, name: &str) -> Result<&'a StringChunked> {
    df.column(name)
        .and_then(|c| c.str())
        .map_err(Error::polars("reading a string column"))
}

/// The values of a primitive column as one vector, nulls as `null`: copied array by array
/// (a plain copy when an array has no nulls).
fn values<T>(ca: &ChunkedArray<T>, null: T::Native) -> Vec<T::Native>
where
    T: PolarsNumericType,
{
    let mut out = Vec::with_capacity(ca.len());
    for arr in ca.downcast_iter() {
        if arr.validity().is_none_or(|v| v.unset_bits() == 0) {
            out.extend_from_slice(arr.values());
        } else {
            out.extend(arr.iter().map(|v| v.copied().unwrap_or(null)));
        }
    }
    out
}

fn f64s(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let ca = df
        .column(name)
        .and_then(|c| c.f64())
        .map_err(Error::polars("reading a number column"))?;
    Ok(values(ca, f64::NAN))
}

fn i64s(df: &DataFrame, name: &str) -> Result<Vec<i64>> {
    let ca = df
        .column(name)
        .and_then(|c| c.i64())
        .map_err(Error::polars("reading an integer column"))?;
    Ok(values(ca, 0))
}

/// The latest `block_time` of `source` in the lake, if it holds any event (from the time span
/// the manifest records for each committed file; no file is read).
pub fn latest_event_time(lake: &Lake, source: EventSource) -> Result<Option<DateTime<Utc>>> {
    Ok(lake
        .manifest()?
        .files_of(source.dataset())
        .map(|(_, e)| e.max_time)
        .max())
}

/// The token side of the selected events of one Parquet file, by token (unsorted).
fn read_file(
    lake: &Lake,
    path: &str,
    source: EventSource,
    selection: &Selection,
    wanted: Option<&TokenSet<'_>>,
    range: TimeRange,
) -> Result<TokenMap<Events>> {
    let mut lf = scan_files(lake, source.dataset(), [path])?;
    if let Some(from) = range.from {
        lf = lf.filter(col("block_time").gt_eq(time_lit(from)));
    }
    if let Some(to) = range.to {
        lf = lf.filter(col("block_time").lt(time_lit(to)));
    }
    let token_cols: &[&str] = match source {
        EventSource::Swaps => &["token_address_in", "token_address_out"],
        EventSource::Trades => &["token_address"],
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
        lf = lf.filter(col("pool_address").eq(lit(p.as_str())));
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
struct Sides<'a> {
    /// Distinct tokens of the file, by index.
    names: Vec<&'a str>,
    index: HashMap<&'a str, u32, Fast>,
    /// Events per token index.
    counts: Vec<usize>,
}

impl<'a> Sides<'a> {
    fn new() -> Self {
        Sides {
            names: Vec::new(),
            index: HashMap::default(),
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

/// No token side on this row.
const NO_SIDE: u32 = u32::MAX;

/// Whether a swap of this type has a token side when no token is named: its bought (`out`)
/// side and its sold (`in`) side (see the module docs).
fn token_sides(swap_type: &str) -> (bool, bool) {
    (
        matches!(swap_type, "quote_token" | "token_token"),
        matches!(swap_type, "token_quote" | "token_token"),
    )
}

/// The numeric columns of some swaps, row by row: each row's bought or sold side as an event.
struct SwapRows<'a> {
    time: &'a [i64],
    slot: &'a [i64],
    id: &'a [i64],
    amount_in: &'a [f64],
    amount_out: &'a [f64],
    price_in: &'a [f64],
    price_out: &'a [f64],
    usd_in: &'a [f64],
    usd_out: &'a [f64],
}

impl SwapRows<'_> {
    /// Row `i`'s bought (`out`) side when `bought`, else its sold (`in`) side.
    fn tick(&self, i: usize, bought: bool) -> Tick {
        let (price, base, usd) = if bought {
            (self.price_out[i], self.amount_out[i], self.usd_out[i])
        } else {
            (self.price_in[i], self.amount_in[i], self.usd_in[i])
        };
        Tick {
            time: self.time[i],
            slot: self.slot[i],
            id: self.id[i],
            price,
            base,
            usd,
            buy: bought,
        }
    }
}

/// A token the registry has not numbered yet.
const UNSEEN: u32 = u32::MAX - 1;

/// The token side of each row of a frame of swaps or trades, by token. A first pass finds each
/// row's token sides and counts the events per token, a second one fills columns allocated at
/// their final size.
fn rows_to_events(
    df: &DataFrame,
    source: EventSource,
    wanted: Option<&TokenSet<'_>>,
) -> Result<TokenMap<Events>> {
    let time = micros(df.column("block_time").map_err(Error::polars("events"))?)?;
    let slot = i64s(df, "block_slot")?;
    let id = i64s(df, "id")?;
    let keep = |t: &str| wanted.is_none_or(|w| w.contains(t));
    let mut sides = Sides::new();
    let mut columns;
    match source {
        EventSource::Swaps => {
            let kind = strs(df, "swap_type")?;
            let t_in = strs(df, "token_address_in")?;
            let t_out = strs(df, "token_address_out")?;
            // The token of each row's bought (`out`) and sold (`in`) side, or NO_SIDE.
            let mut outs = Vec::with_capacity(df.height());
            let mut ins = Vec::with_capacity(df.height());
            for ((k, ti), to) in kind.iter().zip(t_in.iter()).zip(t_out.iter()) {
                let k = k.unwrap_or_default();
                let (ti, to) = (ti.unwrap_or_default(), to.unwrap_or_default());
                let (side_out, side_in) = match wanted {
                    Some(w) => (w.contains(to), w.contains(ti)),
                    None => token_sides(k),
                };
                outs.push(if side_out { sides.count(to) } else { NO_SIDE });
                ins.push(if side_in { sides.count(ti) } else { NO_SIDE });
            }
            columns = sides.columns();
            let (a_in, a_out) = (f64s(df, "token_amount_in")?, f64s(df, "token_amount_out")?);
            let (p_in, p_out) = (f64s(df, "token_price_in")?, f64s(df, "token_price_out")?);
            let (u_in, u_out) = (f64s(df, "usd_amount_in")?, f64s(df, "usd_amount_out")?);
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
            let token = strs(df, "token_address")?;
            let dir = strs(df, "direction")?;
            let tokens: Vec<u32> = token
                .iter()
                .map(|t| {
                    let t = t.unwrap_or_default();
                    if keep(t) { sides.count(t) } else { NO_SIDE }
                })
                .collect();
            columns = sides.columns();
            let (amount, price, usd) = (
                f64s(df, "token_amount")?,
                f64s(df, "token_price")?,
                f64s(df, "usd_amount")?,
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
                    buy: d == Some("buy"),
                });
            }
        }
    }
    Ok(sides.into_map(columns))
}

/// Reads the token side of the selected events in `range` from the lake, grouped by token
/// (tokens in address order) and sorted in event order within each token.
///
/// A token without events in the range is absent from the result (no error).
pub fn load_events(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
) -> Result<Vec<TokenEvents>> {
    load_events_with(lake, source, selection, range, true)
}

/// [`load_events`], reading row group by row group with arrow-rs (`columnar`), or each file
/// through a polars query: the simpler reader, kept as the row-group reader's reference in the
/// tests.
fn load_events_with(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    columnar: bool,
) -> Result<Vec<TokenEvents>> {
    range.validate()?;
    let wanted: Option<TokenSet<'_>> = match selection {
        Selection::Token(t) => Some(std::iter::once(t.as_str()).collect()),
        Selection::Tokens(ts) => Some(ts.iter().map(String::as_str).collect()),
        Selection::Pool(_) | Selection::AllTokens => None,
    };
    if matches!(selection, Selection::Pool(_)) && source == EventSource::Trades {
        return Err(Error::InvalidArgument {
            argument: "selection".into(),
            reason: "trades carry no pool address; select a pool with swaps".into(),
        });
    }
    let manifest = lake.manifest()?;
    let (lo, hi) = (
        range.from.map(|t| t.timestamp_micros()),
        range.to.map(|t| t.timestamp_micros()),
    );
    // Files whose time span misses the range are not opened.
    let mut paths: Vec<String> = manifest
        .files_of(source.dataset())
        .filter(|(_, e)| {
            lo.is_none_or(|lo| e.max_time.timestamp_micros() >= lo)
                && hi.is_none_or(|hi| e.min_time.timestamp_micros() < hi)
        })
        .map(|(p, _)| p.clone())
        .collect();
    paths.sort();
    if columnar {
        return load_columnar(lake, &paths, source, selection, wanted.as_ref(), range);
    }
    // A few reader threads, each one file at a time: only the compact event columns outlive a
    // file's frame. They are plain threads with large stacks, not rayon workers: a polars query
    // started from a rayon worker can exhaust its stack.
    let read = |k: usize, every: usize| -> Result<Vec<TokenMap<Events>>> {
        paths
            .iter()
            .skip(k)
            .step_by(every)
            .map(|path| read_file(lake, path, source, selection, wanted.as_ref(), range))
            .collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(paths.len().max(1));
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

// ---------------------------------------------------------------------------------------
// Swaps and trades, read row group by row group with arrow-rs.
//
// Two passes over the row groups, both in parallel: the first reads only the kind (swap type
// or trade direction) and the token addresses (kept as dictionaries, so a token's name is
// looked up once per row group, not once per row) and finds each row's token sides; with every
// token's count known, each token's columns are allocated at their final size, and the second
// pass reads the numbers and writes each event straight to its place. Within a token, events
// are laid out in file order, row group order and row order, as concatenating the files would.

/// Where a dataset's rows keep their token sides. A swap has a bought (`*_out`) and a sold
/// (`*_in`) side; a trade has one, bought when its direction is `buy`, and its columns serve
/// as both.
struct Layout {
    /// The column whose value picks a row's sides (`swap_type`, `direction`).
    kind: &'static str,
    /// Which sides a kind picks: (bought, sold).
    sides: fn(&str) -> (bool, bool),
    /// Whether a wanted token's side counts whatever the kind (a swap of the token on either
    /// side), or only the side the kind picks.
    wanted_any_side: bool,
    /// The sold and bought sides' token, amount, price and USD amount columns.
    token: [&'static str; 2],
    amount: [&'static str; 2],
    price: [&'static str; 2],
    usd: [&'static str; 2],
}

impl Layout {
    fn of(source: EventSource) -> &'static Layout {
        match source {
            EventSource::Swaps => &SWAPS,
            EventSource::Trades => &TRADES,
        }
    }

    /// The columns of the first pass, each once (plus `block_time` with a bounded range and
    /// `pool_address` for a pool).
    fn side_columns(&self) -> Vec<&'static str> {
        distinct([self.kind, self.token[0], self.token[1]])
    }

    /// The columns of the second pass, each once.
    fn number_columns(&self) -> Vec<&'static str> {
        let [a, p, u] = [self.amount, self.price, self.usd];
        distinct([
            "id",
            "block_slot",
            "block_time",
            a[0],
            a[1],
            p[0],
            p[1],
            u[0],
            u[1],
        ])
    }
}

/// `names` without repeats, in order of first appearance.
fn distinct<const N: usize>(names: [&'static str; N]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::with_capacity(N);
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// A trade's one side: bought when its direction is `buy`, sold otherwise.
fn trade_sides(direction: &str) -> (bool, bool) {
    let buy = direction == "buy";
    (buy, !buy)
}

const SWAPS: Layout = Layout {
    kind: "swap_type",
    sides: token_sides,
    wanted_any_side: true,
    token: ["token_address_in", "token_address_out"],
    amount: ["token_amount_in", "token_amount_out"],
    price: ["token_price_in", "token_price_out"],
    usd: ["usd_amount_in", "usd_amount_out"],
};

const TRADES: Layout = Layout {
    kind: "direction",
    sides: trade_sides,
    wanted_any_side: false,
    token: ["token_address", "token_address"],
    amount: ["token_amount", "token_amount"],
    price: ["token_price", "token_price"],
    usd: ["usd_amount", "usd_amount"],
};

/// The string columns read as dictionaries (those absent from a file are ignored).
const DICTIONARY_COLUMNS: [&str; 6] = [
    "swap_type",
    "token_address_in",
    "token_address_out",
    "pool_address",
    "direction",
    "token_address",
];

/// Files open at once in each pass (a few in tests, so that they read several windows).
const FILES_AT_ONCE: usize = if cfg!(test) { 4 } else { 64 };

/// Token addresses seen so far, numbered in order of first sight.
#[derive(Default)]
struct Registry {
    index: TokenMap<u32>,
    names: Vec<String>,
}

impl Registry {
    fn id(&mut self, token: &str) -> u32 {
        if let Some(&k) = self.index.get(token) {
            return k;
        }
        let k = u32::try_from(self.names.len()).expect("fewer than 2^32 tokens");
        self.names.push(token.to_owned());
        self.index.insert(token.to_owned(), k);
        k
    }
}

/// The token sides of one row group: per row, the bought (`out`) and sold (`in`) side as an
/// index into `tokens` (or [`NO_SIDE`]).
#[derive(Default)]
struct GroupSides {
    outs: Vec<u32>,
    ins: Vec<u32>,
    /// Registry id of each token of the row group.
    tokens: Vec<u32>,
    /// Events per token of the row group.
    counts: Vec<usize>,
    /// Where each token's events of this row group start in its columns.
    starts: Vec<usize>,
}

fn arrow_err(context: String) -> impl FnOnce(arrow::error::ArrowError) -> Error {
    move |source| Error::Arrow { context, source }
}

fn column<'a>(batch: &'a RecordBatch, name: &str, path: &str) -> Result<&'a ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| Error::InvalidArgument {
            argument: "lake".into(),
            reason: format!("{path} lacks column {name}"),
        })
}

/// The distinct values of a string column read as a dictionary (see [`dictionary`]).
struct Values {
    values: ArrayRef,
    /// An empty string added after the values (for null codes).
    empty: bool,
}

impl Values {
    /// The values by code; a null value reads as the empty string.
    fn names(&self) -> Vec<&str> {
        let values = self.values.as_string::<i32>();
        let mut names: Vec<&str> = (0..values.len())
            .map(|i| {
                if values.is_null(i) {
                    ""
                } else {
                    values.value(i)
                }
            })
            .collect();
        if self.empty {
            names.push("");
        }
        names
    }
}

/// A string column as a dictionary (codes and distinct values), whatever it was read as; a
/// null reads as the empty string, as in the frame path.
fn dictionary(batch: &RecordBatch, name: &str, path: &str) -> Result<(Vec<u32>, Values)> {
    let array = column(batch, name, path)?;
    let dict_type = ArrowType::Dictionary(Box::new(ArrowType::Int32), Box::new(ArrowType::Utf8));
    let cast;
    let array = if array.data_type() == &dict_type {
        array
    } else {
        cast = arrow::compute::cast(array, &dict_type)
            .map_err(arrow_err(format!("reading {name} of {path}")))?;
        &cast
    };
    let dict = array.as_dictionary::<Int32Type>();
    let keys = dict.keys();
    let mut values = Values {
        values: Arc::clone(dict.values()),
        empty: false,
    };
    let codes: Vec<u32> = if keys.null_count() == 0 {
        keys.values().iter().map(|&k| k as u32).collect()
    } else {
        let names = values.names();
        let empty = match names.iter().position(|n| n.is_empty()) {
            Some(i) => i,
            None => names.len(),
        } as u32;
        values.empty = empty as usize == names.len();
        keys.iter().map(|k| k.map_or(empty, |k| k as u32)).collect()
    };
    Ok((codes, values))
}

/// The values of a primitive column as `T` (cast if stored otherwise), nulls as `null`.
fn numbers<T: ArrowPrimitiveType>(
    batch: &RecordBatch,
    name: &str,
    path: &str,
    null: T::Native,
) -> Result<PrimitiveArray<T>> {
    let array = column(batch, name, path)?;
    let array = if let ArrowType::Timestamp(unit, _) = array.data_type() {
        let raw = arrow::compute::cast(array, &ArrowType::Int64)
            .map_err(arrow_err(format!("reading {name} of {path}")))?;
        let raw = raw.as_primitive::<Int64Type>();
        let micros: PrimitiveArray<Int64Type> = match unit {
            ArrowUnit::Second => raw.unary(|x| x * 1_000_000),
            ArrowUnit::Millisecond => raw.unary(|x| x * 1000),
            ArrowUnit::Microsecond => raw.clone(),
            ArrowUnit::Nanosecond => raw.unary(|x| x.div_euclid(1000)),
        };
        Arc::new(micros) as ArrayRef
    } else {
        Arc::clone(array)
    };
    let cast = arrow::compute::cast(&array, &T::DATA_TYPE)
        .map_err(arrow_err(format!("reading {name} of {path}")))?;
    let values = cast.as_primitive::<T>();
    Ok(if values.null_count() == 0 {
        values.clone()
    } else {
        values.iter().map(|v| Some(v.unwrap_or(null))).collect()
    })
}

/// The token sides of one row group (see [`GroupSides`]); tokens are numbered in `registry`.
#[allow(clippy::too_many_arguments)]
fn group_sides(
    batch: &RecordBatch,
    path: &str,
    layout: &Layout,
    wanted: Option<&TokenSet<'_>>,
    pool: Option<&str>,
    lo: Option<i64>,
    hi: Option<i64>,
    registry: &RwLock<Registry>,
) -> Result<GroupSides> {
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
        let time = numbers::<Int64Type>(batch, "block_time", path, 0)?;
        keep = Some(
            time.values()
                .iter()
                .map(|&t| lo.is_none_or(|lo| t >= lo) && hi.is_none_or(|hi| t < hi))
                .collect(),
        );
    }
    if let Some(p) = pool {
        let (codes, values) = dictionary(batch, "pool_address", path)?;
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
    let lookup = |used: &[bool], names: &[&str], reg: &Registry| -> Vec<u32> {
        used.iter()
            .zip(names)
            .map(|(&u, name)| match u {
                false => NO_SIDE,
                true => reg.index.get(*name).copied().unwrap_or(UNSEEN),
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
    let mut local: HashMap<u32, u32, Fast> = HashMap::default();
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
    Ok(GroupSides {
        outs: side_out,
        ins: side_in,
        tokens,
        counts,
        starts: Vec::new(),
    })
}

/// The smallest `block_time` of a row group from its statistics (`i64::MIN` without them).
fn group_min_time(metadata: &ArrowReaderMetadata, group: usize) -> i64 {
    let rg = metadata.metadata().row_group(group);
    let Ok(idx) = metadata.schema().index_of("block_time") else {
        return i64::MIN;
    };
    rg.columns()
        .iter()
        .find(|c| c.column_path().parts() == ["block_time"])
        .or_else(|| rg.columns().get(idx))
        .and_then(|c| match c.statistics() {
            Some(parquet::file::statistics::Statistics::Int64(s)) => s.min_opt().copied(),
            _ => None,
        })
        .unwrap_or(i64::MIN)
}

/// The token side of the selected swaps or trades in `range` from the data files `paths`
/// (store paths, sorted), by token in address order, each in event order.
fn load_columnar(
    lake: &Lake,
    paths: &[String],
    source: EventSource,
    selection: &Selection,
    wanted: Option<&TokenSet<'_>>,
    range: TimeRange,
) -> Result<Vec<TokenEvents>> {
    let (lo, hi) = (
        range.from.map(|t| t.timestamp_micros()),
        range.to.map(|t| t.timestamp_micros()),
    );
    let pool = match selection {
        Selection::Pool(p) => Some(p.as_str()),
        _ => None,
    };
    let layout = Layout::of(source);
    let mut side_columns = layout.side_columns();
    if lo.is_some() || hi.is_some() {
        side_columns.push("block_time");
    }
    if pool.is_some() {
        side_columns.push("pool_address");
    }
    let registry = RwLock::new(Registry::default());
    // The files are opened a window at a time, for each pass: a lake of many files never holds
    // a descriptor (or, on an object store, a fetched copy) per file at once.
    let windows: Vec<std::ops::Range<usize>> = (0..paths.len())
        .step_by(FILES_AT_ONCE)
        .map(|w| w..(w + FILES_AT_ONCE).min(paths.len()))
        .collect();
    let mut footers: Vec<ArrowReaderMetadata> = Vec::with_capacity(paths.len());
    // Row groups as (file, row group), in file order.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut sides: Vec<GroupSides> = Vec::new();
    for window in &windows {
        let opened: Vec<(SharedFile, ArrowReaderMetadata)> = window
            .clone()
            .into_par_iter()
            .map(|k| {
                let file = SharedFile::open(lake, &paths[k])?;
                let footer = file.footer_with_dictionaries(&DICTIONARY_COLUMNS)?;
                Ok((file, footer))
            })
            .collect::<Result<_>>()?;
        let first = groups.len();
        for (j, (_, footer)) in opened.iter().enumerate() {
            let k = window.start + j;
            groups.extend((0..footer.metadata().num_row_groups()).map(|g| (k, g)));
        }
        let found: Vec<GroupSides> = groups[first..]
            .par_iter()
            .map(|&(k, g)| {
                let (file, footer) = &opened[k - window.start];
                let batch = file.read_row_group(footer, g, &side_columns)?;
                group_sides(&batch, &paths[k], layout, wanted, pool, lo, hi, &registry)
            })
            .collect::<Result<_>>()?;
        sides.extend(found);
        footers.extend(opened.into_iter().map(|(_, footer)| footer));
    }
    let registry = registry
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    // Each token's events of a row group follow those of the row groups before it, in the
    // order of their first times (files usually hold disjoint times, so a token's events are
    // then already in event order and `Events::sort` only checks it).
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&i| {
        let (k, g) = groups[i];
        (group_min_time(&footers[k], g), k, g)
    });
    let mut totals = vec![0usize; registry.names.len()];
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
    let number_columns = layout.number_columns();
    // Allocated at their final size.
    let columns: Vec<Mutex<Events>> = totals
        .par_iter()
        .map(|&n| Mutex::new(Events::zeroed(n)))
        .collect();
    let mut sides = sides.into_iter();
    let mut at = 0;
    for window in &windows {
        let n = groups[at..]
            .iter()
            .take_while(|(k, _)| window.contains(k))
            .count();
        let (window_groups, window_sides): (&[(usize, usize)], Vec<GroupSides>) =
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
                    .then(|| SharedFile::open(lake, &paths[k]))
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
                let id = numbers::<Int64Type>(&batch, "id", path, 0)?;
                let slot = numbers::<Int64Type>(&batch, "block_slot", path, 0)?;
                let time = numbers::<Int64Type>(&batch, "block_time", path, 0)?;
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
                // The row group's events grouped by token here, then each token's run copied to
                // its place under that token's lock alone.
                let mut local = Events::zeroed(s.counts.iter().sum());
                let mut first = Vec::with_capacity(s.counts.len());
                let mut at = 0;
                for &c in &s.counts {
                    first.push(at);
                    at += c;
                }
                let mut cursor = first.clone();
                let mut put = |l: u32, tick: Tick| {
                    let l = l as usize;
                    local.set(cursor[l], tick);
                    cursor[l] += 1;
                };
                for (i, (&o, &n)) in s.outs.iter().zip(&s.ins).enumerate() {
                    if o != NO_SIDE {
                        put(o, rows.tick(i, true));
                    }
                    if n != NO_SIDE {
                        put(n, rows.tick(i, false));
                    }
                }
                for (l, &t) in s.tokens.iter().enumerate() {
                    let mut dest = columns[t as usize]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    dest.copy_from(s.starts[l], &local, first[l], s.counts[l]);
                }
                Ok(())
            })?;
    }
    let mut out: Vec<TokenEvents> = registry
        .names
        .into_par_iter()
        .zip(columns)
        .map(|(token, events)| {
            let mut events = events.into_inner().unwrap_or_else(PoisonError::into_inner);
            events.sort();
            TokenEvents { token, events }
        })
        .collect();
    out.sort_by(|a, b| a.token.cmp(&b.token));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::api::models::{Direction, PositionState, Swap, SwapType, Trade};
    use crate::lake::{LakeOptions, convert};

    /// A swap of `kind` between `t_in` and `t_out`; its numbers derive from `id`.
    fn swap(id: i64, kind: SwapType, t_in: &str, t_out: &str, time_s: i64, slot: i64) -> Swap {
        let x = id as f64;
        Swap {
            id,
            swap_type: kind,
            protocol: "amm".into(),
            wallet_address: "W".into(),
            pool_address: format!("POOL-{}", id % 3),
            token_address_in: t_in.into(),
            token_address_out: t_out.into(),
            token_amount_in: 1.0 + x,
            token_amount_out: 2.0 + x / 7.0,
            token_price_in: 3.0 + x / 11.0,
            token_price_out: 4.0 + x / 13.0,
            pre_token_balance_in: 0.0,
            pre_token_balance_out: 0.0,
            post_token_balance_in: 0.0,
            post_token_balance_out: 0.0,
            usd_amount_in: 5.0 + x,
            usd_amount_out: 6.0 + x,
            block_slot: slot,
            block_time: Utc.timestamp_opt(time_s, 0).unwrap(),
            tx_hash: format!("tx{id}"),
        }
    }

    /// Swaps of every type over a few tokens, with many events sharing `(block_time,
    /// block_slot)` (ids decide), in files written newest first with row groups of 7 rows.
    fn lake() -> (tempfile::TempDir, Lake) {
        let kinds = [
            (SwapType::QuoteToken, "Q", "A"),
            (SwapType::TokenQuote, "B", "Q"),
            (SwapType::TokenToken, "A", "C"),
            (SwapType::QuoteQuote, "Q", "R"),
            (SwapType::QuoteToken, "Q", "C"),
            (SwapType::TokenQuote, "A", "Q"),
            (SwapType::TokenToken, "C", "B"),
        ];
        let swaps: Vec<Swap> = (0..300i64)
            .map(|k| {
                // Ids in an order unrelated to time, so ties are broken by id, not by row.
                let id = (k * 37) % 301 + 1;
                let (kind, t_in, t_out) = &kinds[(k % 7) as usize];
                swap(id, kind.clone(), t_in, t_out, 1_000 + k / 4 * 10, k / 8)
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let options = LakeOptions {
            row_group_rows: 7,
            ..LakeOptions::default()
        };
        let lake = Lake::open_with(dir.path(), options).unwrap();
        // Trades of the same tokens: buys, sells and an undocumented direction (a sell).
        let directions = [
            Direction::Buy,
            Direction::Sell,
            Direction::Buy,
            Direction::Other("transfer".into()),
        ];
        let trades: Vec<Trade> = swaps
            .iter()
            .enumerate()
            .map(|(k, s)| trade(s, ["A", "B", "C", "Q"][k % 4], directions[k % 4].clone()))
            .collect();
        for (swaps, trades) in swaps.chunks(45).rev().zip(trades.chunks(45).rev()) {
            let (mut swaps, mut trades) = (swaps.to_vec(), trades.to_vec());
            swaps.reverse();
            trades.reverse();
            let mut tx = lake.transaction().unwrap();
            tx.write(Dataset::Swaps, convert::swaps_to_batch(&swaps).unwrap())
                .unwrap();
            tx.write(Dataset::Trades, convert::trades_to_batch(&trades).unwrap())
                .unwrap();
            tx.commit().unwrap();
        }
        (dir, lake)
    }

    /// A trade of `token` at the time, slot and id of `s`, its numbers from the swap's.
    fn trade(s: &Swap, token: &str, direction: Direction) -> Trade {
        Trade {
            id: s.id,
            protocol: s.protocol.clone(),
            swap_type: s.swap_type.clone(),
            wallet_address: "W".into(),
            token_address: token.into(),
            quote_address: "Q".into(),
            position_address: "P".into(),
            direction,
            position_state: PositionState::Trade,
            token_amount: s.token_amount_in,
            quote_amount: s.token_amount_out,
            native_amount: 0.0,
            usd_amount: s.usd_amount_in,
            pre_token_balance: 0.0,
            post_token_balance: 0.0,
            token_price: s.token_price_in,
            quote_price: 1.0,
            token_mcap: 0.0,
            block_slot: s.block_slot,
            block_time: s.block_time,
            tx_hash: s.tx_hash.clone(),
        }
    }

    #[test]
    fn row_groups_read_as_dictionaries_give_the_frames_events() {
        let (_dir, lake) = lake();
        let files = lake.manifest().unwrap().files_of(Dataset::Swaps).count();
        assert!(files >= 6, "{files} files");
        let range = TimeRange {
            from: Some(Utc.timestamp_opt(1_200, 0).unwrap()),
            to: Some(Utc.timestamp_opt(1_555, 0).unwrap()),
        };
        let cases = [
            (Selection::AllTokens, TimeRange::default()),
            (Selection::AllTokens, range),
            (Selection::Token("C".into()), TimeRange::default()),
            (Selection::Tokens(vec!["Q".into(), "A".into()]), range),
            (Selection::Pool("POOL-1".into()), TimeRange::default()),
        ];
        for source in [EventSource::Swaps, EventSource::Trades] {
            for (selection, range) in &cases {
                // Trades carry no pool.
                if source == EventSource::Trades && matches!(selection, Selection::Pool(_)) {
                    continue;
                }
                let read = |columnar| {
                    load_events_with(&lake, source, selection, *range, columnar).unwrap()
                };
                let (columnar, frames) = (read(true), read(false));
                assert!(!columnar.is_empty(), "{source:?} {selection:?}");
                assert_eq!(columnar, frames, "{source:?} {selection:?} {range:?}");
                for t in &columnar {
                    let e = &t.events;
                    assert!((1..e.len()).all(|i| e.key(i - 1) < e.key(i)), "{}", t.token);
                }
            }
        }
        // A trade is one event, a buy only when its direction says so.
        let trades = load_events(
            &lake,
            EventSource::Trades,
            &Selection::AllTokens,
            TimeRange::default(),
        )
        .unwrap();
        let events: usize = trades.iter().map(|t| t.events.len()).sum();
        let buys: usize = trades
            .iter()
            .map(|t| t.events.buy.iter().filter(|&&b| b).count())
            .sum();
        assert_eq!((events, buys), (300, 150));
        // Ties on (block_time, block_slot) are frequent, and broken by id.
        let all = load_events(
            &lake,
            EventSource::Swaps,
            &Selection::AllTokens,
            TimeRange::default(),
        )
        .unwrap();
        let ties = all
            .iter()
            .flat_map(|t| {
                let e = &t.events;
                (1..e.len())
                    .filter(move |&i| (e.time[i - 1], e.slot[i - 1]) == (e.time[i], e.slot[i]))
            })
            .count();
        assert!(ties > 20, "{ties} ties");
        let names: Vec<&str> = all.iter().map(|t| t.token.as_str()).collect();
        assert_eq!(names, ["A", "B", "C"]);
    }
}
