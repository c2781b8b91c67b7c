//! Bars kept up to date as events arrive: [`LiveBars`].
//!
//! Events come in batches of any size and order, each token's separately
//! ([`LiveBars::push`]); a **watermark** says up to when the feed is complete
//! ([`LiveBars::advance`]): every event before it has been pushed. On each advance the events
//! before the new watermark are applied in event order `(time, slot, id)` by the same kernels
//! as [`super::bars`] and [`super::event_bars`], and every bar that closed is returned, once.
//!
//! - **Time bars** close when the watermark passes their bucket's last instant, even when no
//!   event arrives. Empty buckets are filled as the batch bars fill them: between a token's
//!   bars, so they are returned when the token's next bar opens.
//! - **Tick, volume and dollar bars** close with the event that reaches their threshold (see
//!   [`EventRule`]).
//! - **The open bars** ([`LiveBars::provisional`]): each token's bar still being filled by the
//!   events before the watermark, flagged `incomplete`. They may still change.
//! - **Late events**, pushed with a time before the watermark, are counted
//!   ([`LiveBars::late`]) and dropped: merging them would change bars already returned.
//!
//! **Equivalence.** For any events, any split of them into batches and any rising watermarks
//! (no event late), the closed bars returned up to watermark `w` are exactly the rows of
//! `bars_of_events` (or `event_bars_of_events`) over the events before `w` with
//! [`BarOptions::data_end`] `= w` whose `incomplete` is false, and the open bars are its rows
//! whose `incomplete` is true. The property test in `tests.rs` checks it for every bar kind,
//! width, side, fill and time zone.
//!
//! The engine does not de-duplicate: a caller that may see an event twice (overlapping polls)
//! pushes it once (for example, only the rows a lake commit added). Ranges never fetched
//! ([`BarOptions::unfetched`]) do not apply: a live feed has no holes, so options naming some
//! are refused.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use polars::prelude::DataFrame;

use super::grid::Grid;
use super::kernel::{BarColumns, BarOut, EventBarState, PartialBar, TimeBarState, TimeSpec};
use super::{BarOptions, EventRule, bars_frame};
use crate::analytics::events::Tick;
use crate::{Error, Result};

/// What bars a [`LiveBars`] keeps.
#[derive(Debug, Clone, PartialEq)]
pub enum BarRule {
    /// Time bars of these options.
    Time(BarOptions),
    /// Tick, volume or dollar bars.
    Events(EventRule),
}

#[derive(Debug, Clone)]
enum Kind {
    Time(TimeSpec),
    Events(EventRule),
}

/// One token's state: events waiting for the watermark, and its bar in the making.
#[derive(Debug, Default)]
struct TokenState {
    pending: Vec<Tick>,
    time: TimeBarState,
    events: EventBarState,
    late: u64,
}

/// Bars of many tokens kept up to date from events pushed in batches and a rising watermark
/// (see the module documentation).
#[derive(Debug)]
pub struct LiveBars {
    kind: Kind,
    /// Every event before it has been pushed (µs); `None` before the first advance.
    watermark: Option<i64>,
    tokens: BTreeMap<String, TokenState>,
}

/// Bars closed by one [`LiveBars::advance`], with how many events were late since the last.
#[derive(Debug, Clone)]
pub struct LiveUpdate {
    /// The bars that closed, `token_address` then the bar columns, by token then time.
    pub closed: DataFrame,
    /// The watermark now, µs from the epoch.
    pub watermark: i64,
}

/// Closed bars of several tokens, pushed token after token.
#[derive(Default)]
struct Collected {
    bars: BarColumns,
    tokens: Vec<(String, usize)>,
}

impl Collected {
    fn out_for<'a>(&'a mut self, token: &str) -> TokenOut<'a> {
        TokenOut {
            token: token.to_owned(),
            collected: self,
        }
    }

    fn frame(self) -> Result<DataFrame> {
        bars_frame(self.bars, Some(self.tokens))
    }
}

/// A [`BarOut`] that counts the bars of one token in a [`Collected`].
struct TokenOut<'a> {
    token: String,
    collected: &'a mut Collected,
}

impl TokenOut<'_> {
    fn count_one(&mut self) {
        match self.collected.tokens.last_mut() {
            Some((t, n)) if *t == self.token => *n += 1,
            _ => self.collected.tokens.push((self.token.clone(), 1)),
        }
    }
}

impl BarOut for TokenOut<'_> {
    fn bar(&mut self, label: i64, a: &PartialBar) {
        self.collected.bars.bar(label, a);
        self.count_one();
    }

    fn empty(&mut self, label: i64, price: Option<f64>) {
        self.collected.bars.empty(label, price);
        self.count_one();
    }
}

impl LiveBars {
    /// An engine of `rule`'s bars with no event and no watermark. Options are checked as the
    /// batch bars check them; [`BarOptions::data_end`] is ignored (the watermark is the end
    /// of the data) and [`BarOptions::unfetched`] must be empty.
    pub fn new(rule: BarRule) -> Result<LiveBars> {
        let kind = match rule {
            BarRule::Time(options) => {
                if !options.unfetched.is_empty() {
                    return Err(Error::InvalidArgument {
                        argument: "unfetched".into(),
                        reason: "live bars have no ranges never fetched; give none".into(),
                    });
                }
                Kind::Time(TimeSpec {
                    grid: Grid::of(&options)?,
                    closed: options.closed,
                    label: options.label,
                    fill: options.fill,
                    // A bar is returned only once closed; open bars are flagged apart.
                    data_end: i64::MAX,
                })
            }
            BarRule::Events(rule) => {
                rule.validate()?;
                Kind::Events(rule)
            }
        };
        Ok(LiveBars {
            kind,
            watermark: None,
            tokens: BTreeMap::new(),
        })
    }

    /// The watermark, µs from the epoch (`None` before the first advance).
    pub fn watermark(&self) -> Option<i64> {
        self.watermark
    }

    /// Events of `token` in any order. Those before the watermark are late: counted and
    /// dropped. Returns how many of these were late.
    pub fn push(&mut self, token: &str, events: impl IntoIterator<Item = Tick>) -> u64 {
        let watermark = self.watermark.unwrap_or(i64::MIN);
        let state = self.tokens.entry(token.to_owned()).or_default();
        let mut late = 0;
        for e in events {
            if e.time < watermark {
                late += 1;
            } else {
                state.pending.push(e);
            }
        }
        state.late += late;
        late
    }

    /// Events late so far, per token (only tokens with some).
    pub fn late(&self) -> BTreeMap<String, u64> {
        self.tokens
            .iter()
            .filter(|(_, s)| s.late > 0)
            .map(|(t, s)| (t.clone(), s.late))
            .collect()
    }

    /// Moves the watermark to `watermark` (µs; every event before it has been pushed),
    /// applies the events before it and returns the bars that closed. A watermark before the
    /// current one is refused naming `watermark`; the same one closes nothing new.
    pub fn advance(&mut self, watermark: i64) -> Result<LiveUpdate> {
        if let Some(w) = self.watermark
            && watermark < w
        {
            return Err(Error::InvalidArgument {
                argument: "watermark".into(),
                reason: format!(
                    "{} is before the current watermark {}",
                    show(watermark),
                    show(w)
                ),
            });
        }
        let mut collected = Collected::default();
        for (token, state) in &mut self.tokens {
            let mut out = collected.out_for(token);
            // The events before the watermark, in event order; the rest keep waiting.
            let (mut ready, waiting): (Vec<Tick>, Vec<Tick>) = std::mem::take(&mut state.pending)
                .into_iter()
                .partition(|e| e.time < watermark);
            state.pending = waiting;
            ready.sort_by_key(|e| (e.time, e.slot, e.id));
            match &self.kind {
                Kind::Time(spec) => {
                    for e in &ready {
                        state
                            .time
                            .push(PartialBar::of_tick(e), spec, &[], &mut out)?;
                    }
                    // The bucket closes once the watermark passed its last instant.
                    if state
                        .time
                        .current_last_instant(spec)
                        .is_some_and(|last| last < watermark)
                    {
                        state.time.close(spec, &[], &mut out);
                    }
                }
                Kind::Events(rule) => {
                    for e in &ready {
                        state.events.push(PartialBar::of_tick(e), *rule, &mut out)?;
                    }
                }
            }
        }
        self.watermark = Some(watermark);
        Ok(LiveUpdate {
            closed: collected.frame()?,
            watermark,
        })
    }

    /// [`advance`](Self::advance) to an instant.
    pub fn advance_to(&mut self, watermark: DateTime<Utc>) -> Result<LiveUpdate> {
        self.advance(watermark.timestamp_micros())
    }

    /// Each token's open bar (events before the watermark in a bucket or threshold not yet
    /// closed), flagged `incomplete`, as a frame like the closed bars'.
    pub fn provisional(&self) -> Result<DataFrame> {
        let mut collected = Collected::default();
        for (token, state) in &self.tokens {
            let open = match &self.kind {
                Kind::Time(spec) => state.time.current(spec).map(|(label, mut a)| {
                    a.incomplete = true;
                    (label, a)
                }),
                Kind::Events(_) => state.events.open(),
            };
            if let Some((label, a)) = open {
                collected.out_for(token).bar(label, &a);
            }
        }
        collected.frame()
    }

    /// Events pushed and still waiting for the watermark.
    pub fn pending(&self) -> usize {
        self.tokens.values().map(|s| s.pending.len()).sum()
    }
}

/// An instant for a message: RFC 3339, or the microseconds when out of chrono's range.
fn show(micros: i64) -> String {
    DateTime::from_timestamp_micros(micros)
        .map_or_else(|| format!("{micros} µs"), |t| t.to_rfc3339())
}
