//! The bar kernels: one pass over a token's events (or finer bars) in event order.
//!
//! Every sum is accumulated in event order, one event after another, so a token's bars have
//! the same bits whatever the thread count and whatever order the rows were read in.

use super::grid::{FIRST_INSTANT, Grid, LAST_INSTANT};
use super::{Edge, EventRule, Fill, MAX_FILLED_BARS};
use crate::analytics::events::{Events, Tick};
use crate::{Error, Result};

/// A partial bar: one event, or one finer bar being merged into a coarser one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartialBar {
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

impl PartialBar {
    /// The piece of one event at `t`: price `p`, base amount `q`, USD amount `u`.
    #[inline]
    fn piece(t: i64, p: f64, q: f64, u: f64, buy: bool) -> PartialBar {
        PartialBar {
            t,
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

    /// The piece of one event.
    #[inline]
    pub(crate) fn of_tick(t: &Tick) -> PartialBar {
        Self::piece(t.time, t.price, t.base, t.usd, t.buy)
    }

    /// The piece of event `i` of `e`.
    #[inline]
    pub(crate) fn of_event(e: &Events, i: usize) -> PartialBar {
        Self::piece(e.time[i], e.price[i], e.base[i], e.usd[i], e.buy[i])
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

    /// Columns of `n` zero bars, to be overwritten through [`BarColumns::slots`]. The memory
    /// comes zeroed from the allocator, so its pages are touched only when written.
    pub(crate) fn zeroed(n: usize) -> BarColumns {
        BarColumns {
            timestamp: vec![0; n],
            open: vec![0.0; n],
            high: vec![0.0; n],
            low: vec![0.0; n],
            close: vec![0.0; n],
            null_prices: vec![false; n],
            volume: vec![0.0; n],
            base_volume: vec![0.0; n],
            buy_volume: vec![0.0; n],
            sell_volume: vec![0.0; n],
            sum_pq: vec![0.0; n],
            sum_q: vec![0.0; n],
            count: vec![0; n],
            incomplete: vec![false; n],
        }
    }

    /// The columns cut into consecutive shares of `lens` bars each (which should add up to
    /// [`BarColumns::len`]), one per part, so that parts can write their bars side by side.
    pub(crate) fn slots(&mut self, lens: &[usize]) -> Vec<BarSlots<'_>> {
        fn cut<'a, T>(mut rest: &'a mut [T], lens: &[usize]) -> std::vec::IntoIter<&'a mut [T]> {
            let mut out = Vec::with_capacity(lens.len());
            for &n in lens {
                let n = n.min(rest.len());
                let (a, b) = std::mem::take(&mut rest).split_at_mut(n);
                out.push(a);
                rest = b;
            }
            out.into_iter()
        }
        let mut timestamp = cut(&mut self.timestamp, lens);
        let mut open = cut(&mut self.open, lens);
        let mut high = cut(&mut self.high, lens);
        let mut low = cut(&mut self.low, lens);
        let mut close = cut(&mut self.close, lens);
        let mut null_prices = cut(&mut self.null_prices, lens);
        let mut volume = cut(&mut self.volume, lens);
        let mut base_volume = cut(&mut self.base_volume, lens);
        let mut buy_volume = cut(&mut self.buy_volume, lens);
        let mut sell_volume = cut(&mut self.sell_volume, lens);
        let mut sum_pq = cut(&mut self.sum_pq, lens);
        let mut sum_q = cut(&mut self.sum_q, lens);
        let mut count = cut(&mut self.count, lens);
        let mut incomplete = cut(&mut self.incomplete, lens);
        lens.iter()
            .map(|_| BarSlots {
                at: 0,
                timestamp: timestamp.next().unwrap_or_default(),
                open: open.next().unwrap_or_default(),
                high: high.next().unwrap_or_default(),
                low: low.next().unwrap_or_default(),
                close: close.next().unwrap_or_default(),
                null_prices: null_prices.next().unwrap_or_default(),
                volume: volume.next().unwrap_or_default(),
                base_volume: base_volume.next().unwrap_or_default(),
                buy_volume: buy_volume.next().unwrap_or_default(),
                sell_volume: sell_volume.next().unwrap_or_default(),
                sum_pq: sum_pq.next().unwrap_or_default(),
                sum_q: sum_q.next().unwrap_or_default(),
                count: count.next().unwrap_or_default(),
                incomplete: incomplete.next().unwrap_or_default(),
            })
            .collect()
    }
}

/// Where a kernel puts the bars it closes, one after another.
pub(crate) trait BarOut {
    /// A bar of one or more pieces, labelled `label`.
    fn bar(&mut self, label: i64, a: &PartialBar);
    /// A bar with no events (a filled bucket): `price` for its prices, or null prices.
    fn empty(&mut self, label: i64, price: Option<f64>);
}

impl BarOut for BarColumns {
    fn bar(&mut self, label: i64, a: &PartialBar) {
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

    fn empty(&mut self, label: i64, price: Option<f64>) {
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
}

/// Counts the bars a kernel closes without keeping them.
#[derive(Debug, Default)]
pub(crate) struct CountBars(pub usize);

impl BarOut for CountBars {
    #[inline]
    fn bar(&mut self, _: i64, _: &PartialBar) {
        self.0 += 1;
    }

    #[inline]
    fn empty(&mut self, _: i64, _: Option<f64>) {
        self.0 += 1;
    }
}

/// One part's share of [`BarColumns::zeroed`] columns, filled in order. A bar beyond the share
/// is counted but not written, so [`BarSlots::exact`] tells whether the share fit.
#[derive(Debug)]
pub(crate) struct BarSlots<'a> {
    at: usize,
    timestamp: &'a mut [i64],
    open: &'a mut [f64],
    high: &'a mut [f64],
    low: &'a mut [f64],
    close: &'a mut [f64],
    null_prices: &'a mut [bool],
    volume: &'a mut [f64],
    base_volume: &'a mut [f64],
    buy_volume: &'a mut [f64],
    sell_volume: &'a mut [f64],
    sum_pq: &'a mut [f64],
    sum_q: &'a mut [f64],
    count: &'a mut [i64],
    incomplete: &'a mut [bool],
}

impl BarSlots<'_> {
    /// Whether exactly as many bars were written as the share holds.
    pub(crate) fn exact(&self) -> bool {
        self.at == self.timestamp.len()
    }
}

impl BarOut for BarSlots<'_> {
    #[inline]
    fn bar(&mut self, label: i64, a: &PartialBar) {
        let i = self.at;
        self.at += 1;
        if i >= self.timestamp.len() {
            return;
        }
        self.timestamp[i] = label;
        self.open[i] = a.open;
        self.high[i] = a.high;
        self.low[i] = a.low;
        self.close[i] = a.close;
        self.volume[i] = a.volume;
        self.base_volume[i] = a.base;
        self.buy_volume[i] = a.buy;
        self.sell_volume[i] = a.sell;
        self.sum_pq[i] = a.pq;
        self.sum_q[i] = a.q;
        self.count[i] = a.count;
        self.incomplete[i] = a.incomplete;
    }

    #[inline]
    fn empty(&mut self, label: i64, price: Option<f64>) {
        let i = self.at;
        self.at += 1;
        if i >= self.timestamp.len() {
            return;
        }
        // The zeroed columns already hold the empty bar's sums, count and flag.
        self.timestamp[i] = label;
        let p = price.unwrap_or(f64::NAN);
        self.open[i] = p;
        self.high[i] = p;
        self.low[i] = p;
        self.close[i] = p;
        self.null_prices[i] = price.is_none();
    }
}

#[inline]
fn merge(acc: &mut PartialBar, p: &PartialBar) {
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
    pub closed: Edge,
    pub label: Edge,
    pub fill: Fill,
    /// No data is known at or after this instant (µs).
    pub data_end: i64,
}

impl TimeSpec {
    /// Whether the bucket `[start, end)` (or `(start, end]`) may still change: its last
    /// instant is at or after the end of the data.
    fn incomplete(&self, end: i64) -> bool {
        let last = match self.closed {
            Edge::Left => end - 1,
            Edge::Right => end,
        };
        last >= self.data_end
    }

    /// The label of the bucket from `start` to `end`.
    fn label(&self, start: i64, end: i64) -> i64 {
        match self.label {
            Edge::Left => start,
            Edge::Right => end,
        }
    }

    /// The start and end of the bucket holding `t`, or the error naming the width whose
    /// bucket does not fit.
    #[inline]
    fn bucket(&self, t: i64) -> Result<(i64, i64)> {
        let grid = &self.grid;
        grid.start(t, self.closed)
            .and_then(|s| Some((s, grid.next(s)?)))
            .ok_or_else(|| grid.out_of_range(t))
    }
}

/// Whether the bucket from `start` to `end` meets one of `holes` (half-open µs ranges the
/// lake never fetched).
#[inline]
fn meets_hole(holes: &[(i64, i64)], closed: Edge, start: i64, end: i64) -> bool {
    holes.iter().any(|&(from, to)| match closed {
        Edge::Left => from < end && start < to,
        Edge::Right => from <= end && start < to,
    })
}

/// One token's time bars in the making: the bucket being filled, and the last bucket closed
/// (for the empty buckets to fill before the next one). Pieces are pushed in time order; a
/// bar is closed when a piece of a later bucket arrives, or when the caller closes it. The
/// batch kernel ([`time_bars`]) and the live bars (`live.rs`) both run this, so their bars are
/// the same.
#[derive(Debug, Clone, Default)]
pub(crate) struct TimeBarState {
    /// The current bucket: its start, its end, and its bar so far.
    current: Option<(i64, i64, PartialBar)>,
    /// The last bucket closed (emitted or not, when it met a hole): its start, its end, and
    /// its bar's close.
    last: Option<(i64, i64, f64)>,
    /// Filled bars emitted so far, bounded by `MAX_FILLED_BARS`.
    filled: u64,
}

impl TimeBarState {
    /// Adds a piece at or after every piece pushed before. Pieces with `count == 0` (filled
    /// bars) are skipped. A piece of a later bucket closes the current bar into `out`, then
    /// emits the filled buckets up to its own (unless a hole lies between them).
    #[inline]
    pub(crate) fn push<B: BarOut + ?Sized>(
        &mut self,
        p: PartialBar,
        spec: &TimeSpec,
        holes: &[(i64, i64)],
        out: &mut B,
    ) -> Result<()> {
        if p.count == 0 {
            return Ok(());
        }
        // On a fixed grid, the current bucket's bounds answer whether a piece falls in it,
        // without a division per piece.
        if let Some((start, end, acc)) = &mut self.current
            && matches!(spec.grid, Grid::Fixed { .. })
            && match spec.closed {
                Edge::Left => *start <= p.t && p.t < *end,
                Edge::Right => *start < p.t && p.t <= *end,
            }
        {
            merge(acc, &p);
            return Ok(());
        }
        let (b, e) = spec.bucket(p.t)?;
        if let Some((start, _, acc)) = &mut self.current
            && *start == b
        {
            merge(acc, &p);
            return Ok(());
        }
        self.close(spec, holes, out);
        if let Some((start, end, close)) = self.last {
            let across_hole = !holes.is_empty() && meets_hole(holes, spec.closed, start, b);
            if spec.fill != Fill::Skip && !across_hole {
                let price = match spec.fill {
                    Fill::ForwardFill => Some(close),
                    _ => None,
                };
                let mut s = end;
                while s < b {
                    self.filled += 1;
                    if self.filled > MAX_FILLED_BARS {
                        return Err(too_many_filled_bars());
                    }
                    let n = spec.grid.next(s).ok_or_else(|| spec.grid.out_of_range(s))?;
                    out.empty(spec.label(s, n), price);
                    s = n;
                }
            }
        }
        self.current = Some((b, e, p));
        Ok(())
    }

    /// Closes the current bar into `out` (none when its bucket meets one of `holes`).
    pub(crate) fn close<B: BarOut + ?Sized>(
        &mut self,
        spec: &TimeSpec,
        holes: &[(i64, i64)],
        out: &mut B,
    ) {
        if let Some((start, end, mut acc)) = self.current.take() {
            if holes.is_empty() || !meets_hole(holes, spec.closed, start, end) {
                acc.incomplete |= spec.incomplete(end);
                out.bar(spec.label(start, end), &acc);
            }
            self.last = Some((start, end, acc.close));
        }
    }

    /// The last instant of the current bucket, if a bar is being filled.
    pub(crate) fn current_last_instant(&self, spec: &TimeSpec) -> Option<i64> {
        self.current.map(|(_, end, _)| match spec.closed {
            Edge::Left => end - 1,
            Edge::Right => end,
        })
    }

    /// The bar being filled (its label and its bar so far), if any.
    pub(crate) fn current(&self, spec: &TimeSpec) -> Option<(i64, PartialBar)> {
        self.current
            .map(|(start, end, acc)| (spec.label(start, end), acc))
    }
}

/// Time bars of pieces in time order, into `out`. Pieces with `count == 0` (filled bars) are
/// skipped. A bucket that meets one of `holes` (ranges the lake never fetched) gives no bar,
/// and the empty buckets between two bars are filled only when no hole lies between them.
/// Fails, naming the width, when a bucket would start or end outside the instants a bar may
/// have; the bars before it are then in `out`.
pub(crate) fn time_bars<B: BarOut + ?Sized>(
    pieces: impl Iterator<Item = PartialBar>,
    spec: &TimeSpec,
    holes: &[(i64, i64)],
    out: &mut B,
) -> Result<()> {
    let mut state = TimeBarState::default();
    for p in pieces {
        state.push(p, spec, holes, out)?;
    }
    state.close(spec, holes, out);
    Ok(())
}

/// The refusal of a fill past [`MAX_FILLED_BARS`].
fn too_many_filled_bars() -> Error {
    Error::InvalidArgument {
        argument: "fill".into(),
        reason: format!(
            "filling the empty buckets of one token would emit more than {MAX_FILLED_BARS} \
             bars; give a wider interval, a shorter range or the skip fill"
        ),
    }
}

/// Time bars of one token's events, into `out`.
pub(crate) fn event_time_bars<B: BarOut + ?Sized>(
    e: &Events,
    spec: &TimeSpec,
    holes: &[(i64, i64)],
    out: &mut B,
) -> Result<()> {
    time_bars(
        (0..e.len()).map(|i| PartialBar::of_event(e, i)),
        spec,
        holes,
        out,
    )
}

/// One token's tick, volume or dollar bar in the making. Pieces are pushed in event order; a
/// bar closes into `out` with the piece that reaches its threshold. Shared by the batch kernel
/// ([`event_bars`]) and the live bars.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventBarState {
    /// The bar being filled, and the time of its first event (its label).
    open: Option<(i64, PartialBar)>,
}

impl EventBarState {
    /// Adds the next piece in event order; fails when a bar would start at an instant a bar
    /// cannot be labelled with.
    #[inline]
    pub(crate) fn push<B: BarOut + ?Sized>(
        &mut self,
        p: PartialBar,
        rule: EventRule,
        out: &mut B,
    ) -> Result<()> {
        let (first, a) = match &mut self.open {
            Some((first, a)) => {
                merge(a, &p);
                (*first, a)
            }
            None => {
                let first = p.t;
                if !(FIRST_INSTANT..=LAST_INSTANT).contains(&first) {
                    return Err(Error::InvalidArgument {
                        argument: "events".into(),
                        reason: format!(
                            "an event at {first} µs from the epoch is outside the instants a \
                             bar can be labelled with"
                        ),
                    });
                }
                let (_, a) = self.open.insert((first, p));
                (first, a)
            }
        };
        let full = match rule {
            EventRule::Ticks(n) => u64::try_from(a.count).is_ok_and(|c| c >= n),
            EventRule::BaseVolume(v) => a.base >= v,
            EventRule::UsdVolume(v) => a.volume >= v,
        };
        if full {
            out.bar(first, a);
            self.open = None;
        }
        Ok(())
    }

    /// The bar whose threshold is not reached yet (its label and bar so far), flagged
    /// incomplete.
    pub(crate) fn open(&self) -> Option<(i64, PartialBar)> {
        self.open.map(|(first, mut a)| {
            a.incomplete = true;
            (first, a)
        })
    }
}

/// Tick, volume or dollar bars of one token's events (see [`EventRule`]). A bar is labelled
/// with the time of its first event; the last bar is incomplete when its threshold was not
/// reached. Into `out`. Fails when a label is outside the instants a bar may have.
pub(crate) fn event_bars<B: BarOut + ?Sized>(
    e: &Events,
    rule: EventRule,
    out: &mut B,
) -> Result<()> {
    let mut state = EventBarState::default();
    for i in 0..e.len() {
        state.push(PartialBar::of_event(e, i), rule, out)?;
    }
    if let Some((first, a)) = state.open() {
        out.bar(first, &a);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::events::Tick;
    use crate::analytics::ohlcv::BarOptions;

    fn events(times: &[i64]) -> Events {
        Events::from_ticks(times.iter().enumerate().map(|(i, &t)| Tick {
            time: t * 1_000_000,
            slot: i as i64,
            id: i as i64,
            price: 1.0 + i as f64,
            base: 2.0,
            usd: 3.0 + i as f64,
            buy: i % 2 == 0,
        }))
    }

    /// Counting, then writing into shares of zeroed columns, gives the bars that pushing gives,
    /// filled (null and forward-filled) bars included; a share too small is reported, not
    /// overrun.
    #[test]
    fn counted_shares_hold_the_bars_pushing_gives() {
        let parts = [
            events(&[0, 10, 130, 400]),
            events(&[]),
            events(&[59, 61, 300]),
        ];
        for fill in [Fill::Skip, Fill::Null, Fill::ForwardFill] {
            let spec = BarOptions {
                fill,
                ..BarOptions::with_width(60)
            }
            .spec(400_000_001)
            .unwrap();
            let mut pushed = BarColumns::default();
            let mut lens = Vec::new();
            for e in &parts {
                let mut n = CountBars::default();
                event_time_bars(e, &spec, &[], &mut n).unwrap();
                lens.push(n.0);
                event_time_bars(e, &spec, &[], &mut pushed).unwrap();
            }
            assert_eq!(lens.iter().sum::<usize>(), pushed.len(), "{fill:?}");
            let mut written = BarColumns::zeroed(pushed.len());
            for (e, mut slots) in parts.iter().zip(written.slots(&lens)) {
                event_time_bars(e, &spec, &[], &mut slots).unwrap();
                assert!(slots.exact());
            }
            // Debug text compares the NaN prices of null bars too (shortest round-trip floats).
            assert_eq!(format!("{written:?}"), format!("{pushed:?}"), "{fill:?}");
        }
        let spec = BarOptions::with_width(60).spec(400_000_001).unwrap();
        let mut short = BarColumns::zeroed(1);
        let mut slots = short.slots(&[1]);
        event_time_bars(&parts[0], &spec, &[], &mut slots[0]).unwrap();
        assert!(!slots[0].exact());
    }

    /// A fill of more than `MAX_FILLED_BARS` bars is refused naming `fill` (while counting,
    /// before any column is allocated); one bar fewer is built.
    #[test]
    fn a_fill_past_the_limit_is_refused_naming_fill() {
        let gap = i64::try_from(MAX_FILLED_BARS).unwrap();
        for fill in [Fill::Null, Fill::ForwardFill] {
            let spec = BarOptions {
                fill,
                ..BarOptions::with_width(1)
            }
            .spec(i64::MAX)
            .unwrap();
            let mut n = CountBars::default();
            event_time_bars(&events(&[0, gap + 1]), &spec, &[], &mut n).unwrap();
            assert_eq!(n.0 as u64, MAX_FILLED_BARS + 2);
            let err = event_time_bars(
                &events(&[0, gap + 2]),
                &spec,
                &[],
                &mut CountBars::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(err.starts_with("invalid fill:"), "{err}");
            assert!(err.contains("10000000 bars"), "{err}");
        }
    }

    /// A bucket that meets a range never fetched gives no bar, for every fill, and empty
    /// buckets are never filled across such a range; empty buckets elsewhere still are.
    #[test]
    fn buckets_meeting_a_hole_give_no_bar_and_fills_stop_at_it() {
        // Bars at 0, 60, 300, 600 s; a hole from 150 s to 320 s removes the bar of [300, 360)
        // and the buckets [120, 180) .. [300, 360) (and, with it, any fill from 60 to 600).
        let e = events(&[0, 61, 300, 600]);
        let hole = [(150 * 1_000_000, 320 * 1_000_000)];
        for fill in [Fill::Skip, Fill::Null, Fill::ForwardFill] {
            let spec = BarOptions {
                fill,
                ..BarOptions::with_width(60)
            }
            .spec(i64::MAX)
            .unwrap();
            let mut bars = BarColumns::default();
            event_time_bars(&e, &spec, &hole, &mut bars).unwrap();
            let labels: Vec<i64> = bars.timestamp.iter().map(|t| t / 1_000_000).collect();
            match fill {
                Fill::Skip => assert_eq!(labels, [0, 60, 600]),
                // [0, 60) and [60, 120) are neighbours; between 60 and 600 lies the hole.
                _ => assert_eq!(labels, [0, 60, 600], "{fill:?}"),
            }
            let mut n = CountBars::default();
            event_time_bars(&e, &spec, &hole, &mut n).unwrap();
            assert_eq!(n.0, bars.len());
        }
        // Without the hole the forward fill spans 60 to 600.
        let spec = BarOptions {
            fill: Fill::ForwardFill,
            ..BarOptions::with_width(60)
        }
        .spec(i64::MAX)
        .unwrap();
        let mut bars = BarColumns::default();
        event_time_bars(&e, &spec, &[], &mut bars).unwrap();
        assert_eq!(bars.len(), 11);
    }
}
