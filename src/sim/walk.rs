//! One token's swap stream: its times, its price path and who trades.
//!
//! A [`Walk`] holds the state of one token's market as it goes: the log price, the decaying
//! price impact of recent trades, who holds the token and how much. [`Walk::history`] walks
//! the history up to the fixed "now" from the token's own generator; [`Walk::day`] goes on,
//! one day after "now" at a time, each day from a generator of its own, so that the swaps of
//! a day depend only on the seed, the token, the day and the state the days before left, never
//! on how many days are generated.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{ChainParams, NOW};
use super::market::{Behaviour, Chain, PoolInfo, PosState, SwapRecord, TokenInfo, mix};

/// Seconds in a day.
pub(crate) const DAY: i64 = 86_400;

/// A seeded generator for the parts of a key.
pub(crate) fn rng_for(seed: u64, parts: &[u64]) -> ChaCha8Rng {
    let key = parts.iter().fold(seed, |acc, &p| mix(acc, p));
    ChaCha8Rng::seed_from_u64(key)
}

/// A standard normal variate (Box–Muller), written out so that no distribution crate's
/// algorithm choice can change the market.
pub(crate) fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Everything needed to regenerate one token's stream of a chain.
pub(crate) struct StreamSource {
    pub(crate) seed: u64,
    pub(crate) ck: u64,
    pub(crate) params: ChainParams,
    pub(crate) start: i64,
    pub(crate) initial_prices: Vec<f64>,
    pub(crate) counts: Vec<usize>,
    pub(crate) by_behaviour: Vec<Vec<u32>>,
    pub(crate) behaviour_of: Vec<u8>,
}

impl StreamSource {
    /// Regenerates token `token`'s history of `chain` (quote balances not filled).
    pub(crate) fn stream(&self, chain: &Chain, token: u32) -> Vec<SwapRecord> {
        Walk::history(
            self,
            token,
            &chain.tokens[token as usize],
            &chain.pools,
            &chain.native_prices,
        )
        .0
    }
}

/// The state of one token's market between two swaps.
pub(crate) struct Walk<'a> {
    src: &'a StreamSource,
    token: u32,
    info: &'a TokenInfo,
    pools: &'a [PoolInfo],
    native_prices: &'a [f64],
    /// Time origin of the walk (the token's first possible trade), Unix seconds.
    first: i64,
    /// Swaps of the history.
    history_swaps: usize,
    /// Drift and volatility of the log price, per second.
    mu_s: f64,
    sigma_s: f64,
    holders: Holders,
    balances: HashMap<u32, f64>,
    impact: f64,
    /// Time of the latest swap, seconds from `first`.
    prev_t: f64,
    prev_slot_offset: i64,
    /// Diffusion part of the log price at the latest swap.
    log_price: f64,
}

impl<'a> Walk<'a> {
    /// Walks token `token`'s history up to the fixed "now": its swaps (quote balances not
    /// filled) and the walk, ready to go on after "now".
    pub(crate) fn history(
        src: &'a StreamSource,
        token: u32,
        info: &'a TokenInfo,
        pools: &'a [PoolInfo],
        native_prices: &'a [f64],
    ) -> (Vec<SwapRecord>, Walk<'a>) {
        let start = src.start;
        let n = src.counts[token as usize];
        let initial_price = src.initial_prices[token as usize];
        let mut rng = rng_for(src.seed, &[src.ck, 3, u64::from(token)]);
        let first = info.created_at.max(start) + rng.random_range(30..600);
        let span = (NOW - first) as f64;

        // Times: 45 % background, 55 % in bursts; the most active tokens have a burst that runs
        // up to "now", so the short windows have data.
        let n_bursts = rng.random_range(2..8);
        let mut bursts: Vec<(f64, f64)> = (0..n_bursts)
            .map(|_| {
                let center = rng.random::<f64>() * span;
                let width = 600.0 * (rng.random::<f64>() * 4.0).exp();
                (center, width)
            })
            .collect();
        if token < 3 {
            bursts.push((span - 900.0, 1_800.0));
        }
        let mut times: Vec<f64> = (0..n)
            .map(|_| {
                if rng.random::<f64>() < 0.45 {
                    rng.random::<f64>() * span
                } else {
                    let (c, w) = bursts[rng.random_range(0..bursts.len())];
                    (c + w * normal(&mut rng)).clamp(0.0, span - 1.0)
                }
            })
            .collect();
        times.sort_by(f64::total_cmp);

        // Diffusion part of the log price: drift and volatility per token.
        let sigma_day = rng.random_range(0.03..0.25);
        let mu_day = rng.random_range(-0.03..0.03);
        let sigma_s = sigma_day / 86_400f64.sqrt();
        let mu_s = mu_day / 86_400.0;
        let mut diffusion = Vec::with_capacity(n);
        let mut x = initial_price.ln();
        let mut prev_t = 0.0;
        for &t in &times {
            let dt = (t - prev_t).max(0.0);
            x += (mu_s - 0.5 * sigma_s * sigma_s) * dt + sigma_s * dt.sqrt() * normal(&mut rng);
            diffusion.push(x);
            prev_t = t;
        }

        let early_swaps = (n / 50).max(5);
        let mut walk = Walk {
            src,
            token,
            info,
            pools,
            native_prices,
            first,
            history_swaps: n,
            mu_s,
            sigma_s,
            holders: Holders::new(),
            balances: HashMap::new(),
            impact: 0.0,
            prev_t: 0.0,
            prev_slot_offset: 0,
            log_price: initial_price.ln(),
        };
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            let horizon = (k + 30).min(n - 1);
            let future = diffusion[horizon] - diffusion[k];
            out.push(walk.step(&mut rng, times[k], diffusion[k], future, k < early_swaps, 0));
        }
        (out, walk)
    }

    /// The token's swaps of day `day` after the fixed "now" (day 0 begins at "now"), in event
    /// order, quote balances not filled: the history's activity at its average rate (times
    /// drawn as in the history, 45 % background and the rest in a few bursts), the same price
    /// path and the same wallets' behaviours, each swap after "now".
    pub(crate) fn day(&mut self, day: u32) -> Vec<SwapRecord> {
        let src = self.src;
        let p = &src.params;
        let mut rng = rng_for(
            src.seed,
            &[src.ck, 4, u64::from(self.token), u64::from(day)],
        );
        let day_seconds = DAY as f64;
        let day_start = (NOW + i64::from(day) * DAY - self.first) as f64;
        let rate = self.history_swaps as f64 / (NOW - self.first).max(1) as f64;
        let expected = rate * day_seconds * (0.5 * normal(&mut rng)).exp();
        let m = (expected + rng.random::<f64>()).floor() as usize;
        let n_bursts = rng.random_range(1..4);
        let bursts: Vec<(f64, f64)> = (0..n_bursts)
            .map(|_| {
                let center = rng.random::<f64>() * day_seconds;
                let width = 600.0 * (rng.random::<f64>() * 4.0).exp();
                (center, width)
            })
            .collect();
        let mut times: Vec<f64> = (0..m)
            .map(|_| {
                let offset = if rng.random::<f64>() < 0.45 {
                    rng.random::<f64>() * day_seconds
                } else {
                    let (c, w) = bursts[rng.random_range(0..bursts.len())];
                    (c + w * normal(&mut rng)).clamp(0.0, day_seconds - 1.0)
                };
                day_start + offset
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let mut diffusion = Vec::with_capacity(m);
        let (mut x, mut prev_t) = (self.log_price, self.prev_t);
        let (mu_s, sigma_s) = (self.mu_s, self.sigma_s);
        for &t in &times {
            let dt = (t - prev_t).max(0.0);
            x += (mu_s - 0.5 * sigma_s * sigma_s) * dt + sigma_s * dt.sqrt() * normal(&mut rng);
            diffusion.push(x);
            prev_t = t;
        }
        // The first slot whose block time is after "now": no swap after "now" shares a slot
        // (or a block time) with one before it.
        let first_slot = ((NOW - src.start + 1) * p.slots_num + p.slots_den - 1) / p.slots_den;
        (0..m)
            .map(|k| {
                let horizon = (k + 30).min(m - 1);
                let future = diffusion[horizon] - diffusion[k];
                self.step(&mut rng, times[k], diffusion[k], future, false, first_slot)
            })
            .collect()
    }

    /// One swap at `t` (seconds from `first`) with the diffusion part of the log price
    /// `log_price`, `future` its change over the next swaps (what the behaviours look at),
    /// `early` for the token's first swaps, in a slot at least `min_slot_offset`.
    fn step(
        &mut self,
        rng: &mut ChaCha8Rng,
        t: f64,
        log_price: f64,
        future: f64,
        early: bool,
        min_slot_offset: i64,
    ) -> SwapRecord {
        let src = self.src;
        let (p, start) = (&src.params, src.start);
        self.impact *= (-(t - self.prev_t).max(0.0) / 600.0).exp();
        self.prev_t = t;
        self.log_price = log_price;

        let want_buy = rng.random::<f64>() < 0.52 + if future > 0.0 { 0.15 } else { -0.15 };
        let sell_weights: Vec<f64> = Behaviour::ALL
            .iter()
            .enumerate()
            .map(|(b, beh)| {
                let w = match beh {
                    Behaviour::Profitable => {
                        if future < 0.0 {
                            4.0
                        } else {
                            0.3
                        }
                    }
                    Behaviour::Losing => {
                        if future > 0.0 {
                            3.0
                        } else {
                            0.7
                        }
                    }
                    Behaviour::Sniper => 4.0,
                    Behaviour::Holder => 0.15,
                    Behaviour::Bot => 2.0,
                };
                w * self.holders.lists[b].len() as f64
            })
            .collect();
        let sell_from = if want_buy {
            None
        } else {
            pick(rng, &sell_weights)
        };

        let (wallet, buy, amount_tokens, price);
        match sell_from {
            Some(b) => {
                let list = &self.holders.lists[b];
                let w = list[rng.random_range(0..list.len())];
                let held = self.balances[&w];
                let full_p = match Behaviour::ALL[b] {
                    Behaviour::Sniper => 0.7,
                    Behaviour::Profitable => 0.5,
                    Behaviour::Losing => 0.4,
                    Behaviour::Holder => 0.3,
                    Behaviour::Bot => 0.6,
                };
                let amount = if rng.random::<f64>() < full_p {
                    held
                } else {
                    held * rng.random_range(0.2..0.8)
                };
                let usd_guess = amount * (log_price + self.impact).exp();
                self.impact -= impact_of(usd_guess);
                price = (log_price + self.impact).exp();
                wallet = w;
                buy = false;
                amount_tokens = amount;
            }
            None => {
                let weights: Vec<f64> = Behaviour::ALL
                    .iter()
                    .enumerate()
                    .map(|(b, beh)| {
                        if self.src.by_behaviour[b].is_empty() {
                            return 0.0;
                        }
                        match beh {
                            Behaviour::Sniper => {
                                if early {
                                    8.0
                                } else {
                                    0.2
                                }
                            }
                            Behaviour::Profitable => {
                                if future > 0.0 {
                                    3.0
                                } else {
                                    0.2
                                }
                            }
                            Behaviour::Losing => {
                                if future < 0.0 {
                                    3.0
                                } else {
                                    0.5
                                }
                            }
                            Behaviour::Holder => 1.5,
                            Behaviour::Bot => 3.0,
                        }
                    })
                    .collect();
                let b = pick(rng, &weights)
                    .expect("the market has at least one wallet of some behaviour");
                let list = &self.src.by_behaviour[b];
                // Skewed within the behaviour: a few wallets trade much more than the rest.
                let u: f64 = rng.random();
                let w = list[((u * u * u) * list.len() as f64) as usize % list.len()];
                let median = match Behaviour::ALL[b] {
                    Behaviour::Bot => 50.0,
                    Behaviour::Sniper => 500.0,
                    Behaviour::Profitable => 1_500.0,
                    Behaviour::Losing => 300.0,
                    Behaviour::Holder => 800.0,
                };
                let usd = (median * (0.8 * normal(rng)).exp()).min(median * 40.0);
                self.impact += impact_of(usd);
                price = (log_price + self.impact).exp();
                wallet = w;
                buy = true;
                amount_tokens = usd / price;
            }
        }

        let pre = self.balances.get(&wallet).copied().unwrap_or(0.0);
        let (post, state) = if buy {
            let state = if pre == 0.0 {
                PosState::Open
            } else {
                PosState::Trade
            };
            (pre + amount_tokens, state)
        } else if amount_tokens >= pre {
            (0.0, PosState::Close)
        } else {
            (pre - amount_tokens, PosState::Trade)
        };
        let b = usize::from(self.src.behaviour_of[wallet as usize]);
        if post > 0.0 {
            self.balances.insert(wallet, post);
            self.holders.insert(b, wallet);
        } else {
            self.balances.remove(&wallet);
            self.holders.remove(b, wallet);
        }

        let pool_choice = if self.info.pools.len() > 1 && rng.random::<f64>() < 0.3 {
            self.info.pools[1]
        } else {
            self.info.pools[0]
        };
        let quote = self.pools[pool_choice as usize].quote;
        let abs_t = self.first + t as i64;
        let slot_offset = ((abs_t - start) * p.slots_num) / p.slots_den
            + if p.slots_num > p.slots_den {
                rng.random_range(0..p.slots_num / p.slots_den)
            } else {
                0
            };
        // Slots never go backwards within a token, so the stream's order (which the balances
        // above follow) is also its order in the merged event order.
        let slot_offset = slot_offset.max(self.prev_slot_offset).max(min_slot_offset);
        self.prev_slot_offset = slot_offset;
        let slot = p.slot0 + slot_offset;
        let time = start + (slot_offset * p.slots_den) / p.slots_num;
        let minute = (((time - start).max(0)) / 60) as usize;
        let quote_price = if quote == 0 {
            self.native_prices[minute.min(self.native_prices.len() - 1)]
        } else {
            1.0
        };
        let usd = amount_tokens * price;
        SwapRecord {
            slot,
            time,
            token: self.token,
            pool: pool_choice,
            wallet,
            quote,
            buy,
            state,
            token_amount: amount_tokens,
            quote_amount: usd / quote_price,
            token_price: price,
            quote_price,
            pre_token: pre,
            post_token: post,
            pre_quote: 0.0,
            post_quote: 0.0,
        }
    }
}

/// The holders of one token, per behaviour, with O(1) insert and remove.
struct Holders {
    lists: Vec<Vec<u32>>,
    position: HashMap<u32, usize>,
}

impl Holders {
    fn new() -> Self {
        Holders {
            lists: vec![Vec::new(); Behaviour::ALL.len()],
            position: HashMap::new(),
        }
    }

    fn insert(&mut self, b: usize, w: u32) {
        if !self.position.contains_key(&w) {
            self.position.insert(w, self.lists[b].len());
            self.lists[b].push(w);
        }
    }

    fn remove(&mut self, b: usize, w: u32) {
        if let Some(i) = self.position.remove(&w) {
            self.lists[b].swap_remove(i);
            if let Some(&moved) = self.lists[b].get(i) {
                self.position.insert(moved, i);
            }
        }
    }
}

pub(crate) fn behaviour_index(b: Behaviour) -> usize {
    Behaviour::ALL
        .iter()
        .position(|&x| x == b)
        .expect("Behaviour::ALL lists every behaviour")
}

/// Picks an index by weight; `None` when every weight is zero.
fn pick(rng: &mut ChaCha8Rng, weights: &[f64]) -> Option<usize> {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let mut x = rng.random::<f64>() * total;
    for (i, &w) in weights.iter().enumerate() {
        if x < w {
            return Some(i);
        }
        x -= w;
    }
    weights.iter().rposition(|&w| w > 0.0)
}

/// Log-price impact of a trade of `usd`: a square-root law, capped.
fn impact_of(usd: f64) -> f64 {
    (0.002 * (usd / 1_000.0).sqrt()).min(0.05)
}
