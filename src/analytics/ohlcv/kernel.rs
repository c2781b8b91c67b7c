//! The bar kernels: one pass over a token's events (or finer bars) in event order.
//!
//! Every sum is accumulated in event order, one event after another, so a token's bars have
//! the same bits whatever the thread count and whatever order the rows were read in.

use super::grid::Grid;
use super::{EventRule, Fill, Side};
use crate::analytics::events::Events;

/// A piece of a bar: one event, or one finer bar being merged into a coarser one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece {
    /// The instant that decides the bucket (event time, or a finer bar's label).
    pub t: i64,
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    pub volume: f64,
    pub base: f64,
    pub buy: f64,
    pub sell: f64,
    pub pq: f64,
    pub q: f64,
    pub count: i64,
    pub incomplete: bool,
}

impl Piece {
    /// The piece of event `i` of `e`.
    #[inline]
    pub(crate) fn of_event(e: &Events, i: usize) -> Piece {
        let (p, q, u) = (e.price[i], e.base[i], e.usd[i]);
        let buy = e.buy[i];
        Piece {
            t: e.time[i],
            open: p,
            high: p,
            low: p,
            close: p,
            volume: u,
            base: q,
            buy: if buy { u } else { 0.0 },
            sell: if buy { 0.0 } else { u },
            pq: p * q,
            q,
            count: 1,
            incomplete: false,
        }
    }
}

/// Bars as columns (before `vwap`, which is derived from `sum_pq / sum_q`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarColumns {
    /// Label of each bar, microseconds from the epoch.
    pub timestamp: Vec<i64>,
    /// First price.
    pub open: Vec<f64>,
    /// Highest price.
    pub high: Vec<f64>,
    /// Lowest price.
    pub low: Vec<f64>,
    /// Last price.
    pub close: Vec<f64>,
    /// Whether the bar's prices are null (a `Fill::Null` bar; its prices hold NaN).
    pub null_prices: Vec<bool>,
    /// USD volume.
    pub volume: Vec<f64>,
    /// Token (base) volume.
    pub base_volume: Vec<f64>,
    /// USD volume of buys.
    pub buy_volume: Vec<f64>,
    /// USD volume of sells.
    pub sell_volume: Vec<f64>,
    /// Σ price × base amount.
    pub sum_pq: Vec<f64>,
    /// Σ base amount over the events that priced (equal to `base_volume`).
    pub sum_q: Vec<f64>,
    /// Number of events.
    pub count: Vec<i64>,
    /// Whether the bar's bucket (or threshold) is not complete yet.
    pub incomplete: Vec<bool>,
}

impl BarColumns {
    /// Number of bars.
    pub fn len(&self) -> usize {
        self.timestamp.len()
    }

    /// Whether there are no bars.
    pub fn is_empty(&self) -> bool {
        self.timestamp.is_empty()
    }

    fn push(&mut self, label: i64, a: &Piece) {
        self.timestamp.push(label);
        self.open.push(a.open);
        self.high.push(a.high);
        self.low.push(a.low);
        self.close.push(a.close);
        self.null_prices.push(false);
        self.volume.push(a.volume);
        self.base_volume.push(a.base);
        self.buy_volume.push(a.buy);
        self.sell_volume.push(a.sell);
        self.sum_pq.push(a.pq);
        self.sum_q.push(a.q);
        self.count.push(a.count);
        self.incomplete.push(a.incomplete);
    }

    fn push_empty(&mut self, label: i64, price: Option<f64>) {
        self.timestamp.push(label);
        let p = price.unwrap_or(f64::NAN);
        self.open.push(p);
        self.high.push(p);
        self.low.push(p);
        self.close.push(p);
        self.null_prices.push(price.is_none());
        for v in [
            &mut self.volume,
            &mut self.base_volume,
            &mut self.buy_volume,
            &mut self.sell_volume,
            &mut self.sum_pq,
            &mut self.sum_q,
        ] {
            v.push(0.0);
        }
        self.count.push(0);
        self.incomplete.push(false);
    }

    /// Empty columns with room for `n` bars.
    pub fn with_capacity(n: usize) -> BarColumns {
        BarColumns {
            timestamp: Vec::with_capacity(n),
            open: Vec::with_capacity(n),
            high: Vec::with_capacity(n),
            low: Vec::with_capacity(n),
            close: Vec::with_capacity(n),
            null_prices: Vec::with_capacity(n),
            volume: Vec::with_capacity(n),
            base_volume: Vec::with_capacity(n),
            buy_volume: Vec::with_capacity(n),
            sell_volume: Vec::with_capacity(n),
            sum_pq: Vec::with_capacity(n),
            sum_q: Vec::with_capacity(n),
            count: Vec::with_capacity(n),
            incomplete: Vec::with_capacity(n),
        }
    }

    /// Appends `other`'s bars.
    pub fn extend(&mut self, other: BarColumns) {
        self.timestamp.extend(other.timestamp);
        self.open.extend(other.open);
        self.high.extend(other.high);
        self.low.extend(other.low);
        self.close.extend(other.close);
        self.null_prices.extend(other.null_prices);
        self.volume.extend(other.volume);
        self.base_volume.extend(other.base_volume);
        self.buy_volume.extend(other.buy_volume);
        self.sell_volume.extend(other.sell_volume);
        self.sum_pq.extend(other.sum_pq);
        self.sum_q.extend(other.sum_q);
        self.count.extend(other.count);
        self.incomplete.extend(other.incomplete);
    }
}

#[inline]
fn merge(acc: &mut Piece, p: &Piece) {
    acc.high = acc.high.max(p.high);
    acc.low = acc.low.min(p.low);
    acc.close = p.close;
    acc.volume += p.volume;
    acc.base += p.base;
    acc.buy += p.buy;
    acc.sell += p.sell;
    acc.pq += p.pq;
    acc.q += p.q;
    acc.count += p.count;
    acc.incomplete |= p.incomplete;
}

/// Time-bar parameters the kernel needs.
#[derive(Debug, Clone)]
pub(crate) struct TimeSpec {
    pub grid: Grid,
    pub closed: Side,
    pub label: Side,
    pub fill: Fill,
    /// No data is known at or after this instant (µs).
    pub data_end: i64,
}

impl TimeSpec {
    /// Whether the bucket starting at `start` may still change: its last instant is at or
    /// after the end of the data.
    fn incomplete(&self, start: i64) -> bool {
        let end = self.grid.next(start);
        let last = match self.closed {
            Side::Left => end - 1,
            Side::Right => end,
        };
        last >= self.data_end
    }

    fn label(&self, start: i64) -> i64 {
        match self.label {
            Side::Left => start,
            Side::Right => self.grid.next(start),
        }
    }
}

/// Time bars of pieces in time order. Pieces with `count == 0` (filled bars) are skipped.
pub(crate) fn time_bars(pieces: impl Iterator<Item = Piece>, spec: &TimeSpec) -> BarColumns {
    let mut out = BarColumns::default();
    let mut current: Option<(i64, Piece)> = None;
    let flush = |out: &mut BarColumns, start: i64, mut acc: Piece| {
        acc.incomplete |= spec.incomplete(start);
        out.push(spec.label(start), &acc);
    };
    // On a fixed grid, the current bucket's bounds answer whether a piece falls in it, without
    // a division per piece.
    let fixed = matches!(spec.grid, Grid::Fixed { .. });
    let mut end = i64::MIN;
    let holds = |start: i64, end: i64, t: i64| match spec.closed {
        Side::Left => start <= t && t < end,
        Side::Right => start < t && t <= end,
    };
    for p in pieces {
        if p.count == 0 {
            continue;
        }
        if let Some((start, acc)) = &mut current
            && fixed
            && holds(*start, end, p.t)
        {
            merge(acc, &p);
            continue;
        }
        let b = spec.grid.start(p.t, spec.closed);
        match &mut current {
            Some((start, acc)) if *start == b => merge(acc, &p),
            _ => {
                end = spec.grid.next(b);
                if let Some((start, acc)) = current.take() {
                    flush(&mut out, start, acc);
                    if spec.fill != Fill::Skip {
                        let price = match spec.fill {
                            Fill::ForwardFill => Some(acc.close),
                            _ => None,
                        };
                        let mut s = spec.grid.next(start);
                        while s < b {
                            out.push_empty(spec.label(s), price);
                            s = spec.grid.next(s);
                        }
                    }
                }
                current = Some((b, p));
            }
        }
    }
    if let Some((start, acc)) = current {
        flush(&mut out, start, acc);
    }
    out
}

/// Time bars of one token's events.
pub(crate) fn event_time_bars(e: &Events, spec: &TimeSpec) -> BarColumns {
    time_bars((0..e.len()).map(|i| Piece::of_event(e, i)), spec)
}

/// Tick, volume or dollar bars of one token's events (see [`EventRule`]). A bar is labelled
/// with the time of its first event; the last bar is incomplete when its threshold was not
/// reached.
pub(crate) fn event_bars(e: &Events, rule: EventRule) -> BarColumns {
    let mut out = BarColumns::default();
    let mut acc: Option<Piece> = None;
    let mut first = 0i64;
    for i in 0..e.len() {
        let p = Piece::of_event(e, i);
        let a = match &mut acc {
            Some(a) => {
                merge(a, &p);
                a
            }
            None => {
                first = p.t;
                acc.insert(p)
            }
        };
        let full = match rule {
            EventRule::Ticks(n) => a.count as u64 >= n,
            EventRule::BaseVolume(v) => a.base >= v,
            EventRule::UsdVolume(v) => a.volume >= v,
        };
        if full {
            out.push(first, a);
            acc = None;
        }
    }
    if let Some(mut a) = acc {
        a.incomplete = true;
        out.push(first, &a);
    }
    out
}
