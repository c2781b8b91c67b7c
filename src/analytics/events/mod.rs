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
//!
//! | file | what lives there |
//! |---|---|
//! | `mod.rs` | the selection ([`EventSource`], [`Selection`], [`TimeRange`], the crate's one time range), the events ([`Tick`], [`Events`], [`TokenEvents`]) and the entry points [`load_events`], [`load_events_in_parts`] ([`EventParts`]), [`latest_event_time`] |
//! | `layout.rs` | where a dataset's rows keep their token sides, and a row's side as an event |
//! | `row_groups.rs` | the reader: row group by row group with arrow-rs, token addresses as dictionaries, in parallel; whole, or in parts of whole tokens |
//! | `spill.rs` | the parts' spill files: each row group's events of a part appended as a segment, a part read back in parallel into its tokens' columns |
//! | `memory.rs` | the in-memory reader: the events of a frame of the lake's schema ([`events_of_frame`]), rows to events by the same rules |
//! | `reference.rs` | (tests only) the simpler reader, each file through a polars query and the in-memory reader: the row-group reader's reference |
//!
//! The files may import `crate::lake` (manifest, `SharedFile`, scans), `crate::analytics::intern`
//! (and, the in-memory reader, `crate::analytics::columns`) and the crate's errors; nothing
//! else of the crate.
//!
//! **Memory.** [`load_events`] holds every selected event (49 bytes each) and, between its
//! passes, 8 bytes per row. [`load_events_in_parts`] holds one part of at most
//! `events_at_once` events ([`EVENTS_AT_ONCE`] by default) after the passes: the bars of every
//! token written to a file, the price stats and the check read that way, so a 100M-swap lake
//! is answered in under 2 GiB (BENCHMARKS.md, "At 100 million events").

mod layout;
mod memory;
#[cfg(test)]
mod reference;
mod row_groups;
mod spill;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};
use polars::prelude::*;

use crate::lake::read::{CommittedFile, committed_files};
use crate::lake::{Dataset, Lake};
pub use crate::time_range::TimeRange;
use crate::{Error, Result};
pub use memory::{events_of_frame, selected_rows};

/// Files open at once in each pass of the reader.
const FILES_AT_ONCE: usize = 64;

/// The most events a reader in parts holds at once by default ([`load_events_in_parts`], the
/// PnL's reader): 2^24 events, about 0.8 GiB of [`Events`] (49 bytes each) or 0.9 GiB of the
/// PnL's events (56 bytes each).
pub const EVENTS_AT_ONCE: usize = 1 << 24;

/// Token addresses, looked up by name.
type TokenSet<'a> = PlHashSet<&'a str>;

/// Which dataset the events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventSource {
    /// Swaps (`swaps` dataset): the token side of each swap.
    #[default]
    Swaps,
    /// Trades (`trades` dataset): one event per trade.
    Trades,
}

impl std::str::FromStr for EventSource {
    type Err = crate::Error;

    /// `swaps` or `trades`, as every door names a source.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "swaps" => Ok(EventSource::Swaps),
            "trades" => Ok(EventSource::Trades),
            other => Err(crate::Error::InvalidArgument {
                argument: "source".into(),
                reason: format!("{other:?}: expected \"swaps\" or \"trades\""),
            }),
        }
    }
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

impl Selection {
    /// Refuses an empty (or blank) token or pool address, which selects nothing: the error
    /// names `token` or `pool`. An empty list of tokens is a selection of no events.
    pub fn validate(&self) -> Result<()> {
        let (argument, blank) = match self {
            Selection::Token(t) => ("token", t.trim().is_empty().then_some(t)),
            Selection::Tokens(ts) => ("token", ts.iter().find(|t| t.trim().is_empty())),
            Selection::Pool(p) => ("pool", p.trim().is_empty().then_some(p)),
            Selection::AllTokens => ("token", None),
        };
        match blank {
            None => Ok(()),
            Some(a) => Err(Error::InvalidArgument {
                argument: argument.into(),
                reason: format!("{a:?}: give a {argument} address"),
            }),
        }
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

/// Where the events of a question are read: the lake's committed files, or a frame of the
/// lake's schema held in memory (a group of a distributed computation). Both go through the
/// same rules (`layout.rs`) to the same [`TokenEvents`].
#[derive(Debug, Clone, Copy)]
pub enum EventInput<'a> {
    /// The lake's committed files of the source's dataset.
    Lake(&'a Lake),
    /// Rows of the source's dataset held in memory ([`events_of_frame`]).
    Frame(&'a DataFrame),
}

impl EventInput<'_> {
    /// The token side of the selected events in `range`, by token in address order, each in
    /// event order ([`load_events`] or [`events_of_frame`]).
    pub fn load(
        self,
        source: EventSource,
        selection: &Selection,
        range: TimeRange,
    ) -> Result<Vec<TokenEvents>> {
        match self {
            EventInput::Lake(lake) => load_events(lake, source, selection, range),
            EventInput::Frame(frame) => events_of_frame(frame, source, selection, range),
        }
    }
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
    load_events_in_windows(lake, source, selection, range, FILES_AT_ONCE)
}

/// The selected events of [`load_events_in_parts`], a part at a time.
pub struct EventParts {
    /// The latest time of any selected event, µs.
    latest: Option<i64>,
    parts: PartsHeld,
    /// Parts handed over so far.
    next: usize,
}

/// Where the parts are.
enum PartsHeld {
    /// One part, in memory (taken when handed over).
    Whole(Option<Vec<TokenEvents>>),
    /// Spilled to files, read back one at a time.
    Spilled(spill::SpillReader),
}

impl EventParts {
    fn whole(tokens: Vec<TokenEvents>) -> EventParts {
        EventParts {
            // Each token's events are in event order, time first: its last is its latest.
            latest: tokens
                .iter()
                .filter_map(|t| t.events.time.last().copied())
                .max(),
            parts: PartsHeld::Whole((!tokens.is_empty()).then_some(tokens)),
            next: 0,
        }
    }

    fn spilled(reader: spill::SpillReader, latest: Option<i64>) -> EventParts {
        EventParts {
            latest,
            parts: PartsHeld::Spilled(reader),
            next: 0,
        }
    }

    /// The latest `block_time` of any selected event (µs since the epoch), known before any
    /// part is handed over; `None` without events.
    pub fn latest_time(&self) -> Option<i64> {
        self.latest
    }

    /// The number of parts (0 without events).
    pub fn len(&self) -> usize {
        match &self.parts {
            PartsHeld::Whole(tokens) => usize::from(tokens.is_some() || self.next > 0),
            PartsHeld::Spilled(reader) => reader.len(),
        }
    }

    /// Whether the selection has no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next part's tokens (in address order, each in event order), `None` after the last.
    pub fn next_part(&mut self) -> Result<Option<Vec<TokenEvents>>> {
        let part = match &mut self.parts {
            PartsHeld::Whole(tokens) => tokens.take(),
            PartsHeld::Spilled(reader) if self.next < reader.len() => {
                Some(row_groups::by_address(reader.read_part(self.next)?))
            }
            PartsHeld::Spilled(_) => None,
        };
        self.next += usize::from(part.is_some());
        Ok(part)
    }
}

/// [`load_events`] in parts of whole tokens, at most `events_at_once` events a part (a token
/// with more is a part alone), in address order: the parts' concatenation is what
/// [`load_events`] gives, but a selection with more events than `events_at_once` is never all
/// in memory. The files are read once: with more than one part, each row group's events are
/// dealt to a temporary spill file per part (unnamed, in the system's temporary folder, each
/// let go once its part is read back, and taken back by the system however the process ends),
/// so the disk briefly holds the selection's events, 49 bytes each.
pub fn load_events_in_parts(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    events_at_once: usize,
) -> Result<EventParts> {
    let (files, wanted) = selected_files(lake, source, selection, range)?;
    row_groups::read_in_parts(
        lake,
        &files,
        source,
        selection,
        wanted.as_ref(),
        range,
        FILES_AT_ONCE,
        events_at_once,
    )
    .map_err(|e| e.in_file(lake.root(), ""))
}

/// [`load_events`] over some of the lake's committed files only (store paths relative to the
/// lake's root; paths the manifest does not list are left out): a follower reads the events
/// a poll's commits added.
pub fn load_events_in_files(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    paths: &std::collections::BTreeSet<String>,
) -> Result<Vec<TokenEvents>> {
    let (mut files, wanted) = selected_files(lake, source, selection, range)?;
    files.retain(|(p, _)| paths.contains(p));
    row_groups::read(
        lake,
        &files,
        source,
        selection,
        wanted.as_ref(),
        range,
        FILES_AT_ONCE,
    )
}

/// [`load_events`] opening `files_at_once` files at a time in each pass.
fn load_events_in_windows(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    files_at_once: usize,
) -> Result<Vec<TokenEvents>> {
    let (files, wanted) = selected_files(lake, source, selection, range)?;
    row_groups::read(
        lake,
        &files,
        source,
        selection,
        wanted.as_ref(),
        range,
        files_at_once,
    )
    // A damaged file's error names the file; the lake's root is added here.
    .map_err(|e| e.in_file(lake.root(), ""))
}

/// The tokens `selection` names (`None` for every token), after checking the selection (a
/// blank address, a pool of trades): what every reader asks first.
fn wanted_tokens(source: EventSource, selection: &Selection) -> Result<Option<TokenSet<'_>>> {
    selection.validate()?;
    if matches!(selection, Selection::Pool(_)) && source == EventSource::Trades {
        return Err(Error::InvalidArgument {
            argument: "selection".into(),
            reason: "trades carry no pool address; select a pool with swaps".into(),
        });
    }
    Ok(match selection {
        Selection::Token(t) => Some(std::iter::once(t.as_str()).collect()),
        Selection::Tokens(ts) => Some(ts.iter().map(String::as_str).collect()),
        Selection::Pool(_) | Selection::AllTokens => None,
    })
}

/// The data files of `source` that can hold events of `range` (store paths, sorted, with their
/// manifest entries), and the tokens `selection` names (`None` for every token); an invalid
/// range or selection is an error.
fn selected_files<'a>(
    lake: &Lake,
    source: EventSource,
    selection: &'a Selection,
    range: TimeRange,
) -> Result<(Vec<CommittedFile>, Option<TokenSet<'a>>)> {
    range.validate()?;
    let wanted = wanted_tokens(source, selection)?;
    let manifest = lake.manifest()?;
    let (lo, hi) = (
        range.from.map(|t| t.timestamp_micros()),
        range.to.map(|t| t.timestamp_micros()),
    );
    // Files whose time span misses the range are not opened.
    let files = committed_files(&manifest, source.dataset(), lo, hi);
    Ok((files, wanted))
}
