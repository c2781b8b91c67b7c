//! Generation of the synthetic market from a seed.
//!
//! Each token's swap stream is generated independently from `(seed, chain, token)`: swap times
//! (a background rate plus bursts), a price path (geometric Brownian motion with a per-token
//! drift, plus a decaying price impact of each trade), and who trades (wallets of different
//! behaviours, chosen with a look at where the price goes next, so that some wallets profit and
//! some lose). The streams are then merged into one event order, ids are assigned, and a
//! global pass fills the wallets' quote balances. Every step uses seeded ChaCha generators
//! and plain arithmetic, so the same seed gives the same market to the byte.
//!
//! A live market is the same history, then each token's walk going on after "now" for the
//! horizon's days ([`live`](super::live)); nothing of the history depends on whether or how far
//! the market goes on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::Scale;
use super::live::{ChainShape, continuation};
use super::market::{
    Behaviour, Chain, PoolInfo, QuoteInfo, SwapRecord, SyntheticMarket, TokenInfo, WalletInfo,
    base58_string, fill_quote, hex_string, mix,
};
use super::streams::{StreamCache, SwapStreams};
use super::walk::{DAY, StreamSource, Walk, behaviour_index, normal, rng_for};
use crate::api::models::ChainFamily;

/// The simulated "now": 2025-06-01T00:00:00Z, the end of every generated history.
pub(crate) const NOW: i64 = 1_748_736_000;
/// Length of the generated history: 62 days, so that 30-day stats have a previous period.
pub(crate) const HISTORY_SECONDS: i64 = 62 * 86_400;

/// Sizes of one chain at one scale.
#[derive(Debug, Clone, Copy)]
struct ChainSize {
    tokens: usize,
    wallets: usize,
    swaps: usize,
}

fn sizes(scale: Scale) -> (ChainSize, ChainSize) {
    let (alt, evm) = match scale {
        Scale::Tiny => ((10, 60, 4_000), (5, 30, 1_000)),
        Scale::Small => ((60, 1_500, 50_000), (20, 300, 10_000)),
        Scale::Medium => ((400, 20_000, 1_000_000), (100, 3_000, 100_000)),
        Scale::Large => ((3_000, 150_000, 10_000_000), (300, 20_000, 1_000_000)),
        Scale::XLarge => ((30_000, 1_500_000, 100_000_000), (300, 20_000, 1_000_000)),
    };
    let size = |(tokens, wallets, swaps)| ChainSize {
        tokens,
        wallets,
        swaps,
    };
    (size(alt), size(evm))
}

/// Parameters that differ between chains.
#[derive(Clone)]
pub(crate) struct ChainParams {
    kind: ChainFamily,
    /// Slot (or block number) at the start of the history.
    pub(crate) slot0: i64,
    /// Slots per second as a fraction `num / den`.
    pub(crate) slots_num: i64,
    pub(crate) slots_den: i64,
    /// Native coin price at the start of the history, USD.
    native_start: f64,
    first_id: i64,
    quotes: [(&'static str, &'static str, bool); 2],
    pub(crate) protocols: [&'static str; 3],
}

fn params(kind: ChainFamily) -> ChainParams {
    match kind {
        ChainFamily::Altchain => ChainParams {
            kind,
            slot0: 330_000_000,
            // 2.5 slots per second (a slot every 400 ms).
            slots_num: 5,
            slots_den: 2,
            native_start: 150.0,
            first_id: 5_000_000_001,
            quotes: [
                ("WNAT", "Wrapped Native", true),
                ("USDQ", "USD Quote", false),
            ],
            protocols: ["amm-v4", "clmm", "bonding-curve"],
        },
        ChainFamily::Evm(1) => ChainParams {
            kind,
            slot0: 22_000_000,
            // A block every 12 seconds.
            slots_num: 1,
            slots_den: 12,
            native_start: 2_500.0,
            first_id: 1_000_000_001,
            quotes: [("WETH", "Wrapped Ether", true), ("USDC", "USD Coin", false)],
            protocols: ["uniswap-v2", "uniswap-v3", "sushiswap"],
        },
        ChainFamily::Evm(_) => ChainParams {
            kind,
            slot0: 30_000_000,
            // A block every 2 seconds.
            slots_num: 1,
            slots_den: 2,
            native_start: 2_500.0,
            first_id: 2_000_000_001,
            quotes: [("WETH", "Wrapped Ether", true), ("USDC", "USD Coin", false)],
            protocols: ["uniswap-v3", "aerodrome", "baseswap"],
        },
    }
}

/// Generates the whole market. The large and extra-large markets keep compact indexes only and
/// regenerate token streams on demand.
pub(crate) fn generate(seed: u64, scale: Scale) -> SyntheticMarket {
    generate_with(seed, scale, matches!(scale, Scale::Large | Scale::XLarge))
}

/// Generates the market, keeping every stream (`lazy` false) or regenerating on demand.
pub(crate) fn generate_with(seed: u64, scale: Scale, lazy: bool) -> SyntheticMarket {
    generate_market(seed, scale, lazy, None)
}

/// Generates a live market: the history of [`generate`] (kept in memory), then `days` days of
/// trading after "now".
pub(crate) fn generate_live(seed: u64, scale: Scale, days: u32) -> SyntheticMarket {
    generate_market(seed, scale, false, Some(days))
}

fn generate_market(seed: u64, scale: Scale, lazy: bool, days: Option<u32>) -> SyntheticMarket {
    let (alt_size, evm_size) = sizes(scale);
    let alt = generate_chain(seed, &params(ChainFamily::Altchain), alt_size, lazy, days);
    let evm = [1, 8453]
        .into_iter()
        .map(|id| generate_chain(seed, &params(ChainFamily::Evm(id)), evm_size, lazy, days))
        .collect();
    SyntheticMarket {
        seed,
        scale,
        alt,
        evm,
        now: NOW,
    }
}

fn chain_key(kind: ChainFamily) -> u64 {
    match kind {
        ChainFamily::Altchain => 0xA17C_4A11,
        ChainFamily::Evm(id) => 0xE7E7_0000 ^ id as u64,
    }
}

const SYLLABLES: [&str; 24] = [
    "ba", "ko", "zu", "mi", "ra", "te", "lo", "pe", "fi", "do", "na", "gu", "chi", "vo", "sa",
    "ki", "mu", "ze", "po", "ly", "wa", "xe", "jo", "qu",
];
const NOUNS: [&str; 16] = [
    "Cat", "Moon", "Frog", "Rocket", "Coin", "Dog", "Pepe", "Whale", "Panda", "Inu", "Fire",
    "Gold", "Wave", "Byte", "Nova", "Orb",
];

fn address(kind: ChainFamily, key: u64) -> String {
    match kind {
        ChainFamily::Altchain => base58_string(key, 44),
        ChainFamily::Evm(_) => hex_string(key, 40),
    }
}

fn generate_chain(
    seed: u64,
    p: &ChainParams,
    size: ChainSize,
    lazy: bool,
    days: Option<u32>,
) -> Chain {
    let ck = chain_key(p.kind);
    let start = NOW - HISTORY_SECONDS;
    let mut rng = rng_for(seed, &[ck, 1]);

    // Native coin price per minute: a gentle geometric Brownian motion.
    let minutes = (HISTORY_SECONDS / 60 + 1) as usize;
    let mut native_prices = Vec::with_capacity(minutes);
    let mut log_p = p.native_start.ln();
    let sigma_minute = 0.6 / (365.0f64 * 1440.0).sqrt();
    for _ in 0..minutes {
        native_prices.push(log_p.exp());
        log_p += sigma_minute * normal(&mut rng);
    }
    // A live market's native price goes on after "now" from a generator of its own, so the
    // history's prices and everything drawn after them stay those of the fixed market.
    if let Some(days) = days {
        let mut after = rng_for(seed, &[ck, 5]);
        let mut log_p = native_prices[minutes - 1].ln();
        for _ in 0..i64::from(days) * DAY / 60 {
            log_p += sigma_minute * normal(&mut after);
            native_prices.push(log_p.exp());
        }
    }

    let quotes: Vec<QuoteInfo> = p
        .quotes
        .iter()
        .enumerate()
        .map(|(i, &(symbol, name, native))| QuoteInfo {
            address: address(p.kind, mix(seed ^ ck, 0x51_0000 + i as u64)),
            symbol,
            name,
            native,
        })
        .collect();

    // Wallets: behaviours in fixed proportions, shuffled by the seed.
    let wallets: Vec<WalletInfo> = (0..size.wallets)
        .map(|i| {
            let u: f64 = rng.random();
            let behaviour = match u {
                u if u < 0.10 => Behaviour::Profitable,
                u if u < 0.35 => Behaviour::Losing,
                u if u < 0.45 => Behaviour::Sniper,
                u if u < 0.70 => Behaviour::Holder,
                _ => Behaviour::Bot,
            };
            WalletInfo {
                address: address(p.kind, mix(seed ^ ck, 0x57_0000_0000 + i as u64)),
                behaviour,
            }
        })
        .collect();
    let mut by_behaviour: HashMap<Behaviour, Vec<u32>> = HashMap::new();
    for (i, w) in wallets.iter().enumerate() {
        by_behaviour.entry(w.behaviour).or_default().push(i as u32);
    }
    let by_behaviour: Vec<Vec<u32>> = Behaviour::ALL
        .iter()
        .map(|b| by_behaviour.remove(b).unwrap_or_default())
        .collect();

    // Tokens and pools. Token 0 is the most active: activity follows a Zipf law.
    let weights: Vec<f64> = (0..size.tokens)
        .map(|i| 1.0 / ((i + 1) as f64).powf(1.1))
        .collect();
    let total_weight: f64 = weights.iter().sum();
    let mut tokens = Vec::with_capacity(size.tokens);
    let mut pools = Vec::new();
    let mut token_swaps = Vec::with_capacity(size.tokens);
    let mut initial_prices = Vec::with_capacity(size.tokens);
    for (i, w) in weights.iter().enumerate() {
        let mut trng = rng_for(seed, &[ck, 2, i as u64]);
        let n = ((size.swaps as f64) * w / total_weight).round().max(20.0) as usize;
        token_swaps.push(n);
        let symbol: String = (0..trng.random_range(2..4))
            .map(|_| SYLLABLES[trng.random_range(0..SYLLABLES.len())])
            .collect::<String>()
            .to_uppercase();
        let name = format!(
            "{} {}",
            NOUNS[trng.random_range(0..NOUNS.len())],
            capitalise(&symbol.to_lowercase())
        );
        // A quarter of the tokens start trading during the history; the rest before it.
        let created_at = if trng.random::<f64>() < 0.25 && i > 0 {
            start + trng.random_range(0..HISTORY_SECONDS - 3_600)
        } else {
            start - trng.random_range(86_400..300 * 86_400)
        };
        let address_key = mix(seed ^ ck, 0x70_0000_0000 + i as u64);
        let token_address = address(p.kind, address_key);
        let handle = symbol.to_lowercase();
        let social = |trng: &mut ChaCha8Rng, pr: f64, v: String| {
            if trng.random::<f64>() < pr {
                Some(v)
            } else {
                None
            }
        };
        // The supply follows from the starting price and a market cap between 5 million and
        // 1 billion USD, so that trade sizes are a plausible share of it.
        let initial_price = 10f64.powf(trng.random_range(-6.0..1.0));
        initial_prices.push(initial_price);
        let total_supply = 10f64.powf(trng.random_range(6.7..9.0)) / initial_price;
        let circulating_supply = total_supply * trng.random_range(0.6..1.0);
        let dev_allocation = circulating_supply * trng.random_range(0.0..0.08);
        let n_pools = if trng.random::<f64>() < 0.3 { 2 } else { 1 };
        let mut token_pools = Vec::with_capacity(n_pools);
        for q in 0..n_pools {
            let pool_index = pools.len() as u32;
            token_pools.push(pool_index);
            pools.push(PoolInfo {
                address: address(p.kind, mix(address_key, 0x9001 + q as u64)),
                token: i as u32,
                quote: q as u8,
                protocol: p.protocols[trng.random_range(0..p.protocols.len())],
                initial_reserve: circulating_supply * trng.random_range(0.05..0.2),
            });
        }
        tokens.push(TokenInfo {
            symbol: symbol.clone(),
            name,
            created_at,
            creator: address(p.kind, mix(address_key, 0xC4EA)),
            image: social(
                &mut trng,
                0.9,
                format!("https://images.example/{token_address}.png"),
            ),
            verified: trng.random::<f64>() < 0.3,
            twitter: social(&mut trng, 0.7, format!("https://x.com/{handle}")),
            discord: social(&mut trng, 0.3, format!("https://discord.gg/{handle}")),
            website: social(&mut trng, 0.5, format!("https://{handle}.example")),
            telegram: social(&mut trng, 0.5, format!("https://t.me/{handle}")),
            address: token_address,
            total_supply,
            circulating_supply,
            dev_allocation,
            pools: token_pools,
        });
    }

    // The most active token takes up the rounding, so a chain has exactly its scale's swaps.
    let mut counts = token_swaps;
    let rounded: usize = counts.iter().sum();
    counts[0] = (counts[0] + size.swaps).saturating_sub(rounded).max(20);
    let mut offsets = Vec::with_capacity(tokens.len() + 1);
    offsets.push(0u32);
    for &n in &counts {
        let last = *offsets.last().expect("offsets start with 0");
        offsets.push(last + u32::try_from(n).expect("a chain has fewer than 2^32 swaps"));
    }
    let total = *offsets.last().expect("offsets start with 0") as usize;
    let source = StreamSource {
        seed,
        ck,
        params: p.clone(),
        start,
        initial_prices,
        counts,
        by_behaviour,
        behaviour_of: wallets
            .iter()
            .map(|w| behaviour_index(w.behaviour) as u8)
            .collect(),
    };

    // Each token's stream, independently and in parallel: the result does not depend on the
    // number of threads because every stream has its own generator. A lazy chain keeps only
    // compact indexes and drops the streams chunk by chunk.
    let mut slot_offsets = vec![0u32; total];
    let mut by_pool: Vec<Vec<u32>> = vec![Vec::new(); pools.len()];
    let mut flows: Vec<(u32, u32, u32, u8, f64)> = Vec::with_capacity(total);
    let mut kept: Vec<Vec<SwapRecord>> = Vec::new();
    let mut final_tokens: Vec<Vec<(u32, f64)>> = vec![Vec::new(); wallets.len()];
    let mut latest_by_token: Vec<Option<u32>> = vec![None; tokens.len()];
    let mut latest_by_pool: Vec<Option<u32>> = vec![None; pools.len()];
    let mut latest_records: HashMap<u32, SwapRecord> = HashMap::new();
    let mut after_now: Vec<Vec<SwapRecord>> = Vec::with_capacity(tokens.len());
    let chunk = if lazy { 32 } else { tokens.len().max(1) };
    for first_token in (0..tokens.len()).step_by(chunk) {
        let last_token = (first_token + chunk).min(tokens.len());
        let streams: Vec<(Vec<SwapRecord>, Vec<SwapRecord>)> = (first_token..last_token)
            .into_par_iter()
            .map(|t| {
                let (history, mut walk) =
                    Walk::history(&source, t as u32, &tokens[t], &pools, &native_prices);
                let after: Vec<SwapRecord> =
                    (0..days.unwrap_or(0)).flat_map(|d| walk.day(d)).collect();
                (history, after)
            })
            .collect();
        for (t, (stream, after)) in (first_token..last_token).zip(streams) {
            after_now.push(after);
            let base = offsets[t];
            // Each wallet's balance of the token after its last swap of it.
            let mut last_balance: HashMap<u32, f64> = HashMap::new();
            for r in &stream {
                last_balance.insert(r.wallet, r.post_token);
            }
            let mut holders: Vec<(u32, f64)> =
                last_balance.into_iter().filter(|(_, b)| *b > 0.0).collect();
            holders.sort_by_key(|h| h.0);
            for (w, b) in holders {
                final_tokens[w as usize].push((t as u32, b));
            }
            if let Some(k) = stream.len().checked_sub(1) {
                latest_by_token[t] = Some(base + k as u32);
            }
            for (k, r) in stream.iter().enumerate() {
                latest_by_pool[r.pool as usize] = Some(base + k as u32);
                let index = base + k as u32;
                let slot_offset = u32::try_from(r.slot - p.slot0)
                    .expect("slots of the history lie within 2^32 of its first slot");
                slot_offsets[index as usize] = slot_offset;
                by_pool[r.pool as usize].push(index);
                let delta = if r.buy {
                    -r.quote_amount
                } else {
                    r.quote_amount
                };
                flows.push((slot_offset, index, r.wallet, r.quote, delta));
            }
            for i in latest_by_token[t]
                .iter()
                .chain(token_pools_latest(&tokens[t], &latest_by_pool))
            {
                latest_records.insert(*i, stream[(*i - base) as usize]);
            }
            if !lazy {
                kept.push(stream);
            }
        }
    }

    // Event order of the chain: (slot, id); ids grow with the token and with the position in
    // its stream, so this is also the order within each token.
    flows.par_sort_unstable_by_key(|f| (f.0, f.1));

    // Quote balances: each wallet starts with enough of each quote token never to go below
    // zero, plus a seeded margin.
    let mut lowest: HashMap<(u32, u8), (f64, f64)> = HashMap::new();
    for &(_, _, w, q, delta) in &flows {
        let e = lowest.entry((w, q)).or_insert((0.0, 0.0));
        e.0 += delta;
        e.1 = e.1.min(e.0);
    }
    let mut balance: HashMap<(u32, u8), f64> = lowest
        .iter()
        .map(|(&(w, q), &(_, min))| {
            let margin = (mix(seed ^ ck, (u64::from(w) << 8) | u64::from(q)) % 10_000) as f64
                / 1_000.0
                * if q == 0 { 1.0 } else { 100.0 };
            ((w, q), -min + margin)
        })
        .collect();
    drop(lowest);
    let mut pre_quote = vec![0.0f64; total];
    let mut by_wallet: Vec<Vec<u32>> = vec![Vec::new(); wallets.len()];
    for &(_, index, w, q, delta) in &flows {
        let b = balance
            .get_mut(&(w, q))
            .expect("every (wallet, quote) pair of a swap has a balance from the flow pass");
        pre_quote[index as usize] = *b;
        *b += delta;
        by_wallet[w as usize].push(index);
    }
    drop(flows);
    let mut final_quotes = vec![[0.0f64; 2]; wallets.len()];
    for (&(w, q), &b) in &balance {
        final_quotes[w as usize][q as usize] = b;
    }
    for (&i, r) in latest_records.iter_mut() {
        fill_quote(r, pre_quote[i as usize]);
    }
    let latest_of = |list: &[Option<u32>]| -> Vec<Option<(u32, SwapRecord)>> {
        list.iter()
            .map(|i| i.map(|i| (i, latest_records[&i])))
            .collect()
    };
    let latest_by_token = latest_of(&latest_by_token);
    let latest_by_pool = latest_of(&latest_by_pool);

    // A live chain's swaps after "now": numbered after the history, quote balances going on
    // from those at "now"; each token's stream then holds its history and what follows.
    let live = days.map(|days| {
        let shape = ChainShape {
            key: mix(seed, ck),
            history: u32::try_from(total).expect("a chain has fewer than 2^32 swaps"),
            history_lens: offsets.windows(2).map(|w| w[1] - w[0]).collect(),
            pools: pools.len(),
            wallets: wallets.len(),
            final_quotes: &final_quotes,
            end: NOW + i64::from(days) * DAY,
        };
        Arc::new(continuation(&shape, &mut after_now))
    });
    let streams = if lazy {
        let lens: Vec<usize> = offsets.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
        SwapStreams::Lazy {
            source: Box::new(source),
            cache: Mutex::new(StreamCache::new(lazy_cache_budget(&lens))),
        }
    } else {
        SwapStreams::Memory(
            kept.into_iter()
                .zip(after_now)
                .enumerate()
                .map(|(t, (mut stream, after))| {
                    let base = offsets[t] as usize;
                    for (k, r) in stream.iter_mut().enumerate() {
                        fill_quote(r, pre_quote[base + k]);
                    }
                    stream.extend(after);
                    Arc::from(stream)
                })
                .collect(),
        )
    };

    Chain {
        kind: p.kind,
        token_by_address: Arc::new(
            tokens
                .iter()
                .enumerate()
                .map(|(i, t)| (t.address.clone(), i as u32))
                .collect(),
        ),
        pool_by_address: Arc::new(
            pools
                .iter()
                .enumerate()
                .map(|(i, t)| (t.address.clone(), i as u32))
                .collect(),
        ),
        wallet_by_address: Arc::new(
            wallets
                .iter()
                .enumerate()
                .map(|(i, t)| (t.address.clone(), i as u32))
                .collect(),
        ),
        tokens,
        pools,
        wallets,
        quotes,
        first_id: p.first_id,
        start,
        now: NOW,
        slot0: p.slot0,
        native_prices: native_prices.into(),
        offsets: offsets.into(),
        slot_offsets: slot_offsets.into(),
        pre_quote: pre_quote.into(),
        by_pool: by_pool.into(),
        by_wallet: by_wallet.into(),
        final_tokens: final_tokens.into(),
        final_quotes: final_quotes.into(),
        latest_by_token: latest_by_token.into(),
        latest_by_pool: latest_by_pool.into(),
        streams: Arc::new(streams),
        hash_seed: mix(seed, ck),
        live,
        visible: 0,
    }
}

/// The latest swap index of each pool of a token, as far as they are known.
fn token_pools_latest<'a>(
    token: &'a TokenInfo,
    latest_by_pool: &'a [Option<u32>],
) -> impl Iterator<Item = &'a u32> + 'a {
    token
        .pools
        .iter()
        .filter_map(move |&p| latest_by_pool[p as usize].as_ref())
}

/// Fewest swap records a lazy chain keeps in its cache of regenerated token streams (about
/// 100 bytes each).
pub(crate) const LAZY_CACHE_RECORDS: usize = 2_500_000;

/// Token streams a client's requests may be paging through at once: a sync's default plan runs
/// 4 jobs with 8 requests in flight.
const STREAMS_IN_USE: usize = 8;

/// Most swap records a lazy chain keeps in its cache (about 1 GB), whatever its streams.
const LAZY_CACHE_MAX_RECORDS: usize = 10_000_000;

/// Swap records a lazy chain's cache keeps, for token streams of `lens` records: room for the
/// [`STREAMS_IN_USE`] largest streams at once, at least [`LAZY_CACHE_RECORDS`] and at most
/// [`LAZY_CACHE_MAX_RECORDS`].
///
/// A stream is regenerated whole (its walk runs from its first swap), so a cache smaller than
/// the streams being paged through at once evicts one of them on every miss and regenerates it
/// again a few pages later. A sync of the large market's pools, the largest first, paged
/// through its four largest tokens (3.25 M records) with room for 2.5 M: the simulator
/// regenerated 46 M records, 4.6 times the chain (see BENCHMARKS.md, "Sync at scale").
fn lazy_cache_budget(lens: &[usize]) -> usize {
    let mut lens = lens.to_vec();
    lens.sort_unstable_by(|a, b| b.cmp(a));
    lens.iter()
        .take(STREAMS_IN_USE)
        .sum::<usize>()
        .clamp(LAZY_CACHE_RECORDS, LAZY_CACHE_MAX_RECORDS)
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::market::PosState;

    fn all_records(chain: &Chain) -> Vec<SwapRecord> {
        (0..chain.swap_count() as u32)
            .map(|i| chain.record(i))
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_market_and_another_seed_another() {
        let a = generate(7, Scale::Tiny);
        let b = generate(7, Scale::Tiny);
        let c = generate(8, Scale::Tiny);
        assert_eq!(all_records(&a.alt), all_records(&b.alt));
        assert_eq!(a.alt.by_wallet, b.alt.by_wallet);
        assert_ne!(all_records(&a.alt), all_records(&c.alt));
    }

    #[test]
    fn lazy_chains_regenerate_exactly_the_kept_streams() {
        let kept = generate_with(3, Scale::Tiny, false);
        let lazy = generate_with(3, Scale::Tiny, true);
        assert!(matches!(*lazy.alt.streams, SwapStreams::Lazy { .. }));
        assert!(matches!(*kept.alt.streams, SwapStreams::Memory(_)));
        for (k, l) in [(&kept.alt, &lazy.alt), (&kept.evm[0], &lazy.evm[0])] {
            assert_eq!(all_records(k), all_records(l));
            assert_eq!(k.by_pool, l.by_pool);
            assert_eq!(k.by_wallet, l.by_wallet);
            assert_eq!(k.slot_offsets, l.slot_offsets);
            assert_eq!(k.final_tokens, l.final_tokens);
            assert_eq!(k.final_quotes, l.final_quotes);
            assert_eq!(k.latest_by_token, l.latest_by_token);
            assert_eq!(k.latest_by_pool, l.latest_by_pool);
        }
    }

    #[test]
    fn the_lazy_cache_holds_the_largest_streams_in_use_at_once() {
        // Small chains keep the floor.
        assert_eq!(lazy_cache_budget(&[10, 30, 20]), LAZY_CACHE_RECORDS);
        // Large ones room for the eight largest streams together.
        let mut lens = vec![1_000_000; 3];
        lens.extend([5; 100]);
        lens.extend([900_000; 6]);
        assert_eq!(lazy_cache_budget(&lens), 3_000_000 + 5 * 900_000);
        // The largest within a bound.
        assert_eq!(lazy_cache_budget(&[5_000_000; 8]), LAZY_CACHE_MAX_RECORDS);
    }

    #[test]
    fn streams_are_consistent_swap_by_swap() {
        let m = generate(11, Scale::Tiny);
        for chain in std::iter::once(&m.alt).chain(&m.evm) {
            // Event order: (slot, id) strictly increasing along every wallet's list, and times
            // never decrease with the slot.
            for list in chain.by_wallet.iter() {
                let keys: Vec<(i64, i64)> = list.iter().map(|&i| chain.key(i)).collect();
                assert!(keys.windows(2).all(|w| w[0] < w[1]));
            }
            let mut token_balance: HashMap<(u32, u32), f64> = HashMap::new();
            let mut quote_balance: HashMap<(u32, u8), f64> = HashMap::new();
            let mut all: Vec<u32> = (0..chain.swap_count() as u32).collect();
            all.sort_by_key(|&i| chain.key(i));
            let mut last_time = i64::MIN;
            for i in all {
                let s = chain.record(i);
                assert!(s.time >= last_time && s.time <= chain.now && s.time >= chain.start);
                last_time = s.time;
                assert_eq!(chain.key(i).0, s.slot);
                assert!(s.token_amount > 0.0 && s.token_price > 0.0 && s.quote_price > 0.0);
                assert!((s.quote_amount * s.quote_price - s.usd()).abs() <= 1e-9 * s.usd());
                let held = token_balance
                    .get(&(s.wallet, s.token))
                    .copied()
                    .unwrap_or(0.0);
                assert_eq!(s.pre_token, held);
                assert!(s.post_token >= 0.0 && s.pre_quote >= 0.0 && s.post_quote >= 0.0);
                let expected_state = if s.buy && held == 0.0 {
                    PosState::Open
                } else if !s.buy && s.post_token == 0.0 {
                    PosState::Close
                } else {
                    PosState::Trade
                };
                assert_eq!(s.state, expected_state);
                token_balance.insert((s.wallet, s.token), s.post_token);
                if let Some(q) = quote_balance.get(&(s.wallet, s.quote)) {
                    assert_eq!(s.pre_quote, *q);
                }
                quote_balance.insert((s.wallet, s.quote), s.post_quote);
                assert_eq!(chain.pools[s.pool as usize].token, s.token);
                assert_eq!(chain.pools[s.pool as usize].quote, s.quote);
            }
            // The kept final balances and latest swaps are those of the streams.
            for (w, list) in chain.final_tokens.iter().enumerate() {
                let expected: Vec<(u32, f64)> = (0..chain.tokens.len() as u32)
                    .filter_map(|t| {
                        let b = token_balance.get(&(w as u32, t)).copied()?;
                        (b > 0.0).then_some((t, b))
                    })
                    .collect();
                assert_eq!(list, &expected);
                for q in 0..2u8 {
                    let b = quote_balance.get(&(w as u32, q)).copied().unwrap_or(0.0);
                    assert_eq!(chain.final_quotes[w][q as usize], b);
                }
            }
            for t in 0..chain.tokens.len() as u32 {
                let last = chain.stream(t).last().copied();
                assert_eq!(chain.latest_of_token(t), last);
            }
            for p in 0..chain.pools.len() as u32 {
                assert_eq!(
                    chain.latest_of_pool(p),
                    chain.pool_records(p).last().copied()
                );
            }
        }
    }

    #[test]
    fn a_live_chain_goes_on_after_its_history_in_event_order() {
        for seed in [1, 2] {
            let m = generate_live(seed, Scale::Tiny, 3);
            for chain in std::iter::once(&m.alt).chain(&m.evm) {
                let history = chain.swap_count() as u32;
                let end = chain.at(NOW + 3 * DAY);
                let after = end.swap_count() as u32 - history;
                assert!(after > 0, "three days bring swaps");
                let last = (0..history).map(|i| chain.key(i)).max().expect("a history");
                let mut prev = last;
                let mut balances: HashMap<(u32, u8), f64> = HashMap::new();
                for i in history..history + after {
                    // Ids and slots grow together after the history; times lie after now.
                    let (key, s) = (end.key(i), end.record(i));
                    assert!(key > prev && key.0 > last.0, "{key:?} after {prev:?}");
                    prev = key;
                    assert!(s.time > NOW && s.time <= NOW + 3 * DAY);
                    assert_eq!(end.token_of(i), s.token);
                    // Quote balances go on, or rise before a buy (a transfer), never below 0.
                    let held = balances
                        .get(&(s.wallet, s.quote))
                        .copied()
                        .unwrap_or(chain.final_quotes[s.wallet as usize][s.quote as usize]);
                    assert!(s.pre_quote == held || (s.buy && s.pre_quote > held));
                    assert!(s.post_quote >= 0.0);
                    balances.insert((s.wallet, s.quote), s.post_quote);
                }
                // Taken at an instant, a chain shows a prefix of the event order.
                let mid = chain.at(NOW + DAY);
                let shown = mid.swap_count() as u32;
                assert!((history..history + after).contains(&shown));
                for i in history..shown {
                    assert!(mid.record(i).time <= NOW + DAY);
                }
                assert!(end.record(shown).time > NOW + DAY);
            }
        }
    }

    #[test]
    fn behaviours_differ_in_outcome() {
        // Over the whole history, profitable wallets make money on their closed positions
        // and losing wallets lose it.
        let m = generate(5, Scale::Small);
        let chain = &m.alt;
        let mut realized: HashMap<Behaviour, f64> = HashMap::new();
        for t in 0..chain.tokens.len() as u32 {
            let mut cost: HashMap<u32, (f64, f64)> = HashMap::new();
            for s in chain.stream(t).iter() {
                let e = cost.entry(s.wallet).or_insert((0.0, 0.0));
                if s.buy {
                    e.0 += s.token_amount;
                    e.1 += s.usd();
                } else {
                    let avg = e.1 / e.0;
                    let pnl = s.usd() - avg * s.token_amount;
                    e.1 -= avg * s.token_amount;
                    e.0 -= s.token_amount;
                    *realized
                        .entry(chain.wallets[s.wallet as usize].behaviour)
                        .or_insert(0.0) += pnl;
                }
            }
        }
        assert!(realized[&Behaviour::Profitable] > 0.0, "{realized:?}");
        assert!(realized[&Behaviour::Losing] < 0.0, "{realized:?}");
    }
}
