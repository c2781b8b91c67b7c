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
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

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

fn polars_err(context: &'static str) -> impl Fn(PolarsError) -> Error {
    move |source| Error::Polars {
        context: context.into(),
        source,
    }
}

/// A `block_time` literal of the lake's type.
pub(crate) fn time_lit(t: DateTime<Utc>) -> Expr {
    lit(t.timestamp_micros()).cast(DataType::Datetime(
        TimeUnit::Microseconds,
        Some(TimeZone::UTC),
    ))
}

/// Microseconds of a datetime column of any unit.
fn micros(c: &Column) -> Result<Vec<i64>> {
    let ca = c.datetime().map_err(polars_err("reading block_time"))?;
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
        .map_err(polars_err("reading a string column"))
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
        .map_err(polars_err("reading a number column"))?;
    Ok(values(ca, f64::NAN))
}

fn i64s(df: &DataFrame, name: &str) -> Result<Vec<i64>> {
    let ca = df
        .column(name)
        .and_then(|c| c.i64())
        .map_err(polars_err("reading an integer column"))?;
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
    path: &Path,
    source: EventSource,
    selection: &Selection,
    wanted: Option<&TokenSet<'_>>,
    range: TimeRange,
) -> Result<TokenMap<Events>> {
    let file =
        PlRefPath::try_from_pathbuf(path.to_path_buf()).map_err(polars_err("opening a file"))?;
    let args = ScanArgsParquet {
        hive_options: HiveOptions {
            enabled: Some(false),
            ..HiveOptions::default()
        },
        glob: false,
        ..ScanArgsParquet::default()
    };
    let mut lf = LazyFrame::scan_parquet_files(std::iter::once(file).collect(), args)
        .map_err(polars_err("scanning a file"))?;
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
    let cols: &[&str] = match source {
        EventSource::Swaps => &[
            "id",
            "swap_type",
            "token_address_in",
            "token_address_out",
            "token_amount_in",
            "token_amount_out",
            "token_price_in",
            "token_price_out",
            "usd_amount_in",
            "usd_amount_out",
            "block_slot",
            "block_time",
        ],
        EventSource::Trades => &[
            "id",
            "token_address",
            "direction",
            "token_amount",
            "token_price",
            "usd_amount",
            "block_slot",
            "block_time",
        ],
    };
    let df = lf
        .select(cols.iter().map(|c| col(*c)).collect::<Vec<_>>())
        .collect()
        .map_err(polars_err("reading events"))?;
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

/// The token side of each row of a frame of swaps or trades, by token. A first pass finds each
/// row's token sides and counts the events per token, a second one fills columns allocated at
/// their final size.
fn rows_to_events(
    df: &DataFrame,
    source: EventSource,
    wanted: Option<&TokenSet<'_>>,
) -> Result<TokenMap<Events>> {
    let time = micros(df.column("block_time").map_err(polars_err("events"))?)?;
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
                    None => (
                        matches!(k, "quote_token" | "token_token"),
                        matches!(k, "token_quote" | "token_token"),
                    ),
                };
                outs.push(if side_out { sides.count(to) } else { NO_SIDE });
                ins.push(if side_in { sides.count(ti) } else { NO_SIDE });
            }
            columns = sides.columns();
            let (a_in, a_out) = (f64s(df, "token_amount_in")?, f64s(df, "token_amount_out")?);
            let (p_in, p_out) = (f64s(df, "token_price_in")?, f64s(df, "token_price_out")?);
            let (u_in, u_out) = (f64s(df, "usd_amount_in")?, f64s(df, "usd_amount_out")?);
            for (i, (&o, &n)) in outs.iter().zip(&ins).enumerate() {
                if o != NO_SIDE {
                    columns[o as usize].push(Tick {
                        time: time[i],
                        slot: slot[i],
                        id: id[i],
                        price: p_out[i],
                        base: a_out[i],
                        usd: u_out[i],
                        buy: true,
                    });
                }
                if n != NO_SIDE {
                    columns[n as usize].push(Tick {
                        time: time[i],
                        slot: slot[i],
                        id: id[i],
                        price: p_in[i],
                        base: a_in[i],
                        usd: u_in[i],
                        buy: false,
                    });
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
    let mut files: Vec<PathBuf> = manifest
        .files_of(source.dataset())
        .filter(|(_, e)| {
            lo.is_none_or(|lo| e.max_time.timestamp_micros() >= lo)
                && hi.is_none_or(|hi| e.min_time.timestamp_micros() < hi)
        })
        .map(|(p, _)| lake.store().location(p))
        .collect();
    files.sort();
    // A few reader threads, each one file at a time: only the compact event columns outlive a
    // file's frame. They are plain threads with large stacks, not rayon workers: a polars query
    // started from a rayon worker can exhaust its stack.
    let read = |k: usize, every: usize| -> Result<Vec<TokenMap<Events>>> {
        files
            .iter()
            .skip(k)
            .step_by(every)
            .map(|path| read_file(path, source, selection, wanted.as_ref(), range))
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
