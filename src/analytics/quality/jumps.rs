//! Price jumps: events whose price departs from the token's rolling median by more than a
//! robust bound.
//!
//! # The rule
//!
//! A token's events are in event order, with log prices `x[i] = ln(price[i])`. For event `i`
//! the window is the `half_window` events before it and the `half_window` after it (fewer at
//! the ends of the stream), without `i` itself. An event with fewer than `half_window / 2`
//! events on either side is not judged: at the ends of a stream (a token's launch, whose first
//! swaps trade far from where the price settles) a one-sided window cannot tell a spike from
//! a move of the market. Over the window:
//! - `m` = the median of the log prices;
//! - `s` = `1.4826 × median(|x[j] − m|)`, the median absolute deviation scaled to estimate a
//!   standard deviation;
//! - the bound is `max(z × s, floor)`.
//!
//! Event `i` is a jump when `|x[i] − m| > bound` and it is a spike: it also departs by more
//! than the bound, in the same direction, from the nearest event on each side (with a price).
//! A quiet token's window can span weeks, and a price at the bottom of a slow move of the
//! market departs from the window's median while its neighbours in time are close to it; a
//! doctored price departs from them too. (Two doctored prices in a row are each other's
//! neighbour and are not reported; the reconciliation with the candles still sees them.)
//! Defaults: `half_window` 16 (32 neighbours),
//! `z` 10, `floor` `ln 2` (a price twice or half the median is always a jump; nothing closer to
//! it than that is). A price that is not finite and positive has no logarithm and is always a
//! jump (with no median when no event of its window has a price either). A price whose window
//! holds no price is not judged: there is nothing to compare it with.
//!
//! The median and the MAD ignore a few wild values, so one doctored price does not move the
//! bound of its neighbours, which stay unreported; the window is centred, so a real move of the
//! market (a level shift) is seen from both sides and is not a jump. The floor keeps a window
//! of nearly equal prices (MAD near 0) from reporting ordinary ticks.

use crate::analytics::Events;

/// Scale of the median absolute deviation to a normal law's standard deviation.
const MAD_SCALE: f64 = 1.4826;

/// The parameters of the jump rule (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JumpRule {
    /// Events on each side of the judged one in its window.
    pub half_window: usize,
    /// Scaled MADs of the window a price may depart from its median.
    pub z: f64,
    /// The smallest bound, in log price.
    pub floor: f64,
}

impl Default for JumpRule {
    fn default() -> Self {
        JumpRule {
            half_window: 16,
            z: 10.0,
            floor: std::f64::consts::LN_2,
        }
    }
}

/// One price jump.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PriceJump {
    /// The token.
    pub token: String,
    /// The event's id.
    pub id: i64,
    /// Its block time.
    pub block_time: chrono::DateTime<chrono::Utc>,
    /// Its slot.
    pub block_slot: i64,
    /// Its USD price.
    pub price: f64,
    /// The median price of its window; null when no event of the window has a price.
    pub median_price: Option<f64>,
    /// `ln(price / median_price)`; null when the price has no logarithm.
    pub log_deviation: Option<f64>,
    /// The bound it broke, in log price.
    pub bound: f64,
}

/// The median of `v` (not empty: the callers skip an empty window), which it reorders.
fn median(v: &mut [f64]) -> f64 {
    let n = v.len();
    let mid = n / 2;
    let (_, hi, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let hi = *hi;
    if n % 2 == 1 {
        hi
    } else {
        let lo = v[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo + hi) / 2.0
    }
}

/// The median and the bound of a window of log prices (not empty), which it reorders.
pub(super) fn window_bound(window: &mut [f64], rule: &JumpRule) -> (f64, f64) {
    let m = median(window);
    for x in window.iter_mut() {
        *x = (*x - m).abs();
    }
    let s = MAD_SCALE * median(window);
    (m, (rule.z * s).max(rule.floor))
}

/// A price the rule judged a jump (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Judged {
    /// Its index in the prices.
    pub(super) index: usize,
    /// The median log price of its window; `None` when no price of the window has a logarithm.
    pub(super) median: Option<f64>,
    /// Its log price less the median; `None` when it has no logarithm.
    pub(super) deviation: Option<f64>,
    /// The bound it broke, in log price.
    pub(super) bound: f64,
}

/// The log of each price, NaN for a price that is not finite and positive (it has none).
pub(super) fn log_prices(prices: &[f64]) -> Vec<f64> {
    prices
        .iter()
        .map(|&p| {
            if p.is_finite() && p > 0.0 {
                p.ln()
            } else {
                f64::NAN
            }
        })
        .collect()
}

/// The jumps among `prices` (in the order of their events or records): the rule itself, for
/// the swaps' events and the stored series' records alike.
pub(super) fn judge(prices: &[f64], rule: &JumpRule) -> Vec<Judged> {
    let k = rule.half_window.max(1);
    let n = prices.len();
    let logs = log_prices(prices);
    let mut out = Vec::new();
    let mut window = Vec::with_capacity(2 * k);
    for i in 0..n {
        window.clear();
        let lo = i.saturating_sub(k);
        let hi = (i + k).min(n - 1);
        window.extend(
            (lo..=hi)
                .filter(|&j| j != i)
                .map(|j| logs[j])
                .filter(|x| !x.is_nan()),
        );
        if i - lo < k.div_ceil(2) || hi - i < k.div_ceil(2) {
            continue;
        }
        let x = logs[i];
        if window.is_empty() {
            // No price around: an unpriced event is still a jump; a priced one is not judged.
            if x.is_nan() {
                out.push(Judged {
                    index: i,
                    median: None,
                    deviation: None,
                    bound: rule.floor,
                });
            }
            continue;
        }
        // The nearest prices before and after, both departed from in the median's direction.
        let nearest_before = logs[lo..i].iter().rev().find(|x| !x.is_nan());
        let nearest_after = logs[i + 1..=hi].iter().find(|x| !x.is_nan());
        // A price within the floor of a neighbour is no spike whatever the window's median:
        // the bound is never under the floor. Most prices are, and skip the two medians.
        if !x.is_nan()
            && [nearest_before, nearest_after]
                .into_iter()
                .flatten()
                .any(|&y| (x - y).abs() <= rule.floor)
        {
            continue;
        }
        let (m, bound) = window_bound(&mut window, rule);
        let deviation = (!x.is_nan()).then_some(x - m);
        let spike = |d: f64| {
            [nearest_before, nearest_after]
                .into_iter()
                .flatten()
                .all(|&y| (x - y) * d.signum() > bound)
        };
        if deviation.is_none_or(|d| d.abs() > bound && spike(d)) {
            out.push(Judged {
                index: i,
                median: Some(m),
                deviation,
                bound,
            });
        }
    }
    out
}

/// The price jumps of one token's events (in event order).
pub(super) fn find_jumps(token: &str, events: &Events, rule: &JumpRule) -> Vec<PriceJump> {
    judge(&events.price, rule)
        .into_iter()
        .map(|j| PriceJump {
            token: token.to_owned(),
            id: events.id[j.index],
            block_time: super::utc(events.time[j.index]),
            block_slot: events.slot[j.index],
            price: events.price[j.index],
            median_price: j.median.map(f64::exp),
            log_deviation: j.deviation,
            bound: j.bound,
        })
        .collect()
}
