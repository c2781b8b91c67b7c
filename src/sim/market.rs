//! The generated market: chains, tokens, pools, wallets and the swap stream, with indexes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;

use super::Scale;
use super::live::Continuation;
use super::streams::{StreamView, SwapStreams};
use crate::api::models::{ChainFamily, Direction, PositionState, Swap, SwapType, Trade};

/// How a wallet trades; the generator uses it to pick who buys and who sells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// Tends to buy before rises and sell before falls.
    Profitable,
    /// Tends to buy before falls and sell before rises.
    Losing,
    /// Buys right after a token starts trading and sells soon after.
    Sniper,
    /// Buys and rarely sells.
    Holder,
    /// Many small trades on both sides.
    Bot,
}

impl Behaviour {
    /// Every behaviour, in a fixed order.
    pub const ALL: [Behaviour; 5] = [
        Behaviour::Profitable,
        Behaviour::Losing,
        Behaviour::Sniper,
        Behaviour::Holder,
        Behaviour::Bot,
    ];
}

/// A tradable (non-quote) token.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenInfo {
    /// Address.
    pub address: String,
    /// Ticker symbol.
    pub symbol: String,
    /// Display name.
    pub name: String,
    /// Creation time, Unix seconds.
    pub created_at: i64,
    /// Creator's address (not one of the trading wallets).
    pub creator: String,
    /// Image URL.
    pub image: Option<String>,
    /// Whether the token is verified.
    pub verified: bool,
    /// Twitter URL.
    pub twitter: Option<String>,
    /// Discord invite.
    pub discord: Option<String>,
    /// Website URL.
    pub website: Option<String>,
    /// Telegram link.
    pub telegram: Option<String>,
    /// Total supply, tokens.
    pub total_supply: f64,
    /// Circulating supply, tokens.
    pub circulating_supply: f64,
    /// Tokens held by the creator outside of any swap.
    pub dev_allocation: f64,
    /// Indexes of the token's pools in [`Chain::pools`].
    pub pools: Vec<u32>,
}

/// A pool trading one token against one quote token.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolInfo {
    /// Address.
    pub address: String,
    /// Index of the token in [`Chain::tokens`].
    pub token: u32,
    /// Index of the quote token in [`Chain::quotes`].
    pub quote: u8,
    /// DEX protocol name.
    pub protocol: &'static str,
    /// Token reserve of the pool before its first swap.
    pub initial_reserve: f64,
}

/// A trading wallet.
#[derive(Debug, Clone, PartialEq)]
pub struct WalletInfo {
    /// Address.
    pub address: String,
    /// How it trades.
    pub behaviour: Behaviour,
}

/// A quote token: the chain's wrapped native coin or its USD stablecoin.
#[derive(Debug, Clone, PartialEq)]
pub struct QuoteInfo {
    /// Address.
    pub address: String,
    /// Ticker symbol.
    pub symbol: &'static str,
    /// Display name.
    pub name: &'static str,
    /// True for the wrapped native coin (priced by the native price path), false for the
    /// stablecoin (always 1 USD).
    pub native: bool,
}

/// One swap, stored compactly; [`Chain::swap`] and [`Chain::trade`] expand it to the wire
/// models. The wallet either buys the token with the quote (`buy`) or sells it for the quote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwapRecord {
    /// Slot (altchain) or block number (EVM).
    pub slot: i64,
    /// Block time, Unix seconds.
    pub time: i64,
    /// Index of the token.
    pub token: u32,
    /// Index of the pool.
    pub pool: u32,
    /// Index of the wallet.
    pub wallet: u32,
    /// Index of the quote token.
    pub quote: u8,
    /// True when the wallet bought the token (swap type `quote_token`).
    pub buy: bool,
    /// Place of the trade in the wallet's position in the token.
    pub state: PosState,
    /// Token amount.
    pub token_amount: f64,
    /// Quote amount.
    pub quote_amount: f64,
    /// Token price, USD.
    pub token_price: f64,
    /// Quote price, USD.
    pub quote_price: f64,
    /// Wallet's token balance before.
    pub pre_token: f64,
    /// Wallet's token balance after.
    pub post_token: f64,
    /// Wallet's quote balance before.
    pub pre_quote: f64,
    /// Wallet's quote balance after.
    pub post_quote: f64,
}

impl SwapRecord {
    /// USD value of the swap: token amount × token price (equal to the quote side, as swaps
    /// carry no fee).
    pub fn usd(&self) -> f64 {
        self.token_amount * self.token_price
    }
}

/// Position state of a trade, compactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PosState {
    /// The trade opened the position (balance was zero before a buy).
    Open,
    /// The trade changed an open position.
    Trade,
    /// The trade closed the position (balance is zero after a sell).
    Close,
}

impl PosState {
    fn model(self) -> PositionState {
        match self {
            PosState::Open => PositionState::Open,
            PosState::Trade => PositionState::Trade,
            PosState::Close => PositionState::Close,
        }
    }
}

/// A list of swap indexes in event order: a token's contiguous range or an explicit list,
/// each possibly followed by the swaps after the fixed "now" of a live market.
#[derive(Debug, Clone, Copy)]
pub enum IndexList<'a> {
    /// Indexes `start..end`.
    Range(u32, u32),
    /// Explicit indexes.
    Slice(&'a [u32]),
    /// Indexes `start..end`, then the explicit indexes.
    RangeThen(u32, u32, &'a [u32]),
    /// The first explicit indexes, then the second.
    SliceThen(&'a [u32], &'a [u32]),
}

impl IndexList<'_> {
    /// Number of swaps.
    pub fn len(&self) -> usize {
        match self {
            IndexList::Range(a, b) => (b - a) as usize,
            IndexList::Slice(s) => s.len(),
            IndexList::RangeThen(a, b, s) => (b - a) as usize + s.len(),
            IndexList::SliceThen(h, s) => h.len() + s.len(),
        }
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index at position `pos`.
    pub fn get(&self, pos: usize) -> u32 {
        match self {
            IndexList::Range(a, _) => a + pos as u32,
            IndexList::Slice(s) => s[pos],
            IndexList::RangeThen(a, b, s) => {
                let head = (b - a) as usize;
                if pos < head {
                    a + pos as u32
                } else {
                    s[pos - head]
                }
            }
            IndexList::SliceThen(h, s) => {
                if pos < h.len() {
                    h[pos]
                } else {
                    s[pos - h.len()]
                }
            }
        }
    }
}

/// One chain of the market with its swap stream and indexes.
///
/// Swaps are numbered token by token: token `t`'s swaps, in event order, have the indexes
/// `offsets[t]..offsets[t + 1]`, and the swap at index `i` has id `first_id + i`. The event
/// order of the whole chain is `(block_slot, id)`, which is also `(block_time, block_slot, id)`.
///
/// A live chain also holds the swaps after the fixed "now", numbered after the history in
/// event order; a chain taken at an instant ([`SyntheticMarket::at`]) shows those up to it,
/// and every method answers as of its `now`. Cloning shares the swaps and indexes.
#[derive(Clone)]
pub struct Chain {
    /// Family and chain id.
    pub kind: ChainFamily,
    /// Tradable tokens, most active first.
    pub tokens: Vec<TokenInfo>,
    /// Pools.
    pub pools: Vec<PoolInfo>,
    /// Trading wallets.
    pub wallets: Vec<WalletInfo>,
    /// Quote tokens: index 0 is the wrapped native coin, index 1 the stablecoin.
    pub quotes: Vec<QuoteInfo>,
    /// Id of the swap at index 0.
    pub first_id: i64,
    /// Start of the generated history, Unix seconds.
    pub start: i64,
    /// The simulated "now" the chain answers at, Unix seconds.
    pub now: i64,
    /// Slot (or block number) at `start`.
    pub(crate) slot0: i64,
    /// Price of the native coin per minute from `start`, USD.
    pub(crate) native_prices: Arc<[f64]>,
    /// Token `t`'s swaps are the indexes `offsets[t]..offsets[t + 1]`.
    pub(crate) offsets: Arc<[u32]>,
    /// Per swap index of the history: its slot minus `slot0`.
    pub(crate) slot_offsets: Arc<[u32]>,
    /// Per swap index of the history: the wallet's balance of the swap's quote token before it.
    pub(crate) pre_quote: Arc<[f64]>,
    /// Per pool: indexes of its swaps of the history, in event order.
    pub(crate) by_pool: Arc<[Vec<u32>]>,
    /// Per wallet: indexes of its swaps of the history, in event order.
    pub(crate) by_wallet: Arc<[Vec<u32>]>,
    /// Per wallet: `(token, balance)` of every token it holds at the fixed "now", by token.
    pub(crate) final_tokens: Arc<[Vec<(u32, f64)>]>,
    /// Per wallet: its balance of each quote token at the fixed "now".
    pub(crate) final_quotes: Arc<[[f64; 2]]>,
    /// Per token: index and record of its latest swap of the history.
    pub(crate) latest_by_token: Arc<[Option<(u32, SwapRecord)>]>,
    /// Per pool: index and record of its latest swap of the history.
    pub(crate) latest_by_pool: Arc<[Option<(u32, SwapRecord)>]>,
    pub(crate) streams: Arc<SwapStreams>,
    pub(crate) token_by_address: Arc<HashMap<String, u32>>,
    pub(crate) pool_by_address: Arc<HashMap<String, u32>>,
    pub(crate) wallet_by_address: Arc<HashMap<String, u32>>,
    /// Seed the chain's hashes (transaction hashes, position addresses) derive from.
    pub(crate) hash_seed: u64,
    /// A live chain's swaps after the fixed "now".
    pub(crate) live: Option<Arc<Continuation>>,
    /// How many of them the chain shows (those at or before `now`).
    pub(crate) visible: u32,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("kind", &self.kind)
            .field("tokens", &self.tokens.len())
            .field("pools", &self.pools.len())
            .field("wallets", &self.wallets.len())
            .field("swaps", &self.swap_count())
            .finish()
    }
}

/// Converts Unix seconds to a UTC time.
pub(crate) fn utc(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0)
        .single()
        .expect("generated times lie within chrono's range")
}

impl Chain {
    /// Number of swaps of the history (up to the fixed "now").
    fn history_count(&self) -> u32 {
        self.slot_offsets.len() as u32
    }

    /// The part of `list` (indexes of swaps after the fixed "now", in event order) that the
    /// chain shows at its `now`; empty for a chain that is not live.
    fn visible_part<'a>(&'a self, list: impl FnOnce(&'a Continuation) -> &'a [u32]) -> &'a [u32] {
        match &self.live {
            Some(c) => Continuation::prefix(list(c), self.history_count() + self.visible),
            None => &[],
        }
    }

    /// The chain as it answers at `now` (Unix seconds): a live chain shows the swaps at or
    /// before it; a chain that is not live only moves its `now`.
    pub(crate) fn at(&self, now: i64) -> Chain {
        let mut chain = self.clone();
        chain.now = now;
        chain.visible = self.live.as_ref().map_or(0, |c| c.visible_at(now));
        chain
    }

    /// Number of swaps (as of `now`).
    pub fn swap_count(&self) -> usize {
        self.history_count() as usize + self.visible as usize
    }

    /// The id of the swap at `index`.
    pub fn swap_id(&self, index: u32) -> i64 {
        self.first_id + i64::from(index)
    }

    /// The index of the swap with `id`, if it exists (as of `now`).
    pub fn swap_index(&self, id: i64) -> Option<u32> {
        let i = id.checked_sub(self.first_id)?;
        if i >= 0 && (i as usize) < self.swap_count() {
            u32::try_from(i).ok()
        } else {
            None
        }
    }

    /// The event-order key `(block_slot, id)` of the swap at `index`.
    pub fn key(&self, index: u32) -> (i64, i64) {
        let slot = match (index.checked_sub(self.history_count()), &self.live) {
            (Some(j), Some(c)) => c.slots[j as usize],
            _ => self.slot0 + i64::from(self.slot_offsets[index as usize]),
        };
        (slot, self.swap_id(index))
    }

    /// The token of the swap at `index`.
    pub fn token_of(&self, index: u32) -> u32 {
        match (index.checked_sub(self.history_count()), &self.live) {
            (Some(j), Some(c)) => c.entries[j as usize].0,
            _ => (self.offsets.partition_point(|&o| o <= index) - 1) as u32,
        }
    }

    /// Index of a token by address.
    pub fn token_index(&self, address: &str) -> Option<u32> {
        self.token_by_address.get(address).copied()
    }

    /// Index of a pool by address.
    pub fn pool_index(&self, address: &str) -> Option<u32> {
        self.pool_by_address.get(address).copied()
    }

    /// Index of a wallet by address.
    pub fn wallet_index(&self, address: &str) -> Option<u32> {
        self.wallet_by_address.get(address).copied()
    }

    /// Indexes of a token's swaps, in event order.
    pub fn token_swaps(&self, token: u32) -> IndexList<'_> {
        let t = token as usize;
        let (a, b) = (self.offsets[t], self.offsets[t + 1]);
        match self.visible_part(|c| c.by_token[t].as_slice()) {
            [] => IndexList::Range(a, b),
            after => IndexList::RangeThen(a, b, after),
        }
    }

    /// Indexes of a pool's swaps, in event order.
    pub fn pool_swaps(&self, pool: u32) -> IndexList<'_> {
        let history = &self.by_pool[pool as usize];
        match self.visible_part(|c| c.by_pool[pool as usize].as_slice()) {
            [] => IndexList::Slice(history),
            after => IndexList::SliceThen(history, after),
        }
    }

    /// Indexes of a wallet's swaps, in event order.
    pub fn wallet_swaps(&self, wallet: u32) -> IndexList<'_> {
        let history = &self.by_wallet[wallet as usize];
        match self.visible_part(|c| c.by_wallet[wallet as usize].as_slice()) {
            [] => IndexList::Slice(history),
            after => IndexList::SliceThen(history, after),
        }
    }

    /// A token's swaps in event order, as of `now`: its swap at position `k` has index
    /// `offsets[t] + k` in the history; after it, the positions follow the token's swaps after
    /// the fixed "now" in event order.
    pub fn stream(&self, token: u32) -> StreamView {
        let t = token as usize;
        let len = (self.offsets[t + 1] - self.offsets[t]) as usize
            + self.visible_part(|c| c.by_token[t].as_slice()).len();
        match &*self.streams {
            SwapStreams::Memory(streams) => StreamView::new(streams[t].clone(), len),
            SwapStreams::Lazy { source, cache } => {
                if let Some(s) = cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(token)
                {
                    return StreamView::new(s, len);
                }
                // Regenerated outside the lock: two requests may both regenerate a stream,
                // which costs time but gives the same records.
                let mut records = source.stream(self, token);
                let first = self.offsets[t] as usize;
                for (k, r) in records.iter_mut().enumerate() {
                    fill_quote(r, self.pre_quote[first + k]);
                }
                let stream: Arc<[SwapRecord]> = records.into();
                cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(token, stream.clone());
                StreamView::new(stream, len)
            }
        }
    }

    /// The swap at `index`.
    pub fn record(&self, index: u32) -> SwapRecord {
        match (index.checked_sub(self.history_count()), &self.live) {
            (Some(j), Some(c)) => {
                let (t, pos) = c.entries[j as usize];
                self.stream(t)[pos as usize]
            }
            _ => {
                let t = self.token_of(index);
                self.stream(t)[(index - self.offsets[t as usize]) as usize]
            }
        }
    }

    /// The latest swap of a token, if it has any (as of `now`).
    pub fn latest_of_token(&self, token: u32) -> Option<SwapRecord> {
        match self
            .visible_part(|c| c.by_token[token as usize].as_slice())
            .last()
        {
            Some(&i) => Some(self.record(i)),
            None => self.latest_by_token[token as usize].map(|(_, r)| r),
        }
    }

    /// The latest swap of a pool, if it has any (as of `now`).
    pub fn latest_of_pool(&self, pool: u32) -> Option<SwapRecord> {
        match self
            .visible_part(|c| c.by_pool[pool as usize].as_slice())
            .last()
        {
            Some(&i) => Some(self.record(i)),
            None => self.latest_by_pool[pool as usize].map(|(_, r)| r),
        }
    }

    /// A wallet's token balances at `now` (`(token, balance)`, positive, by token) and its
    /// quote balances: those the generator kept for the fixed "now", moved by the wallet's
    /// swaps after it (so that no token stream of the history is read).
    pub fn final_balances(&self, wallet: u32) -> (Vec<(u32, f64)>, [f64; 2]) {
        let w = wallet as usize;
        let mut quotes = self.final_quotes[w];
        let after = self.visible_part(|c| c.by_wallet[w].as_slice());
        if after.is_empty() {
            return (self.final_tokens[w].clone(), quotes);
        }
        let mut tokens: BTreeMap<u32, f64> = self.final_tokens[w].iter().copied().collect();
        for &i in after {
            let s = self.record(i);
            tokens.insert(s.token, s.post_token);
            quotes[s.quote as usize] = s.post_quote;
        }
        (
            tokens.into_iter().filter(|(_, b)| *b > 0.0).collect(),
            quotes,
        )
    }

    /// A pool's swaps in event order.
    pub fn pool_records(&self, pool: u32) -> Vec<SwapRecord> {
        let stream = self.stream(self.pools[pool as usize].token);
        stream.iter().filter(|s| s.pool == pool).copied().collect()
    }

    /// Price of the native coin at Unix time `t`, USD (constant within each minute).
    pub fn native_price(&self, t: i64) -> f64 {
        let i = ((t - self.start).max(0) / 60) as usize;
        self.native_prices[i.min(self.native_prices.len() - 1)]
    }

    /// Price of quote token `quote` at Unix time `t`, USD.
    pub fn quote_price(&self, quote: u8, t: i64) -> f64 {
        if self.quotes[quote as usize].native {
            self.native_price(t)
        } else {
            1.0
        }
    }

    /// Transaction hash of the swap at `index`.
    pub fn tx_hash(&self, index: u32) -> String {
        let key = mix(self.hash_seed ^ 0x7478_6861_7368, u64::from(index));
        match self.kind {
            ChainFamily::Altchain => base58_string(key, 88),
            ChainFamily::Evm(_) => hex_string(key, 64),
        }
    }

    /// Address of a wallet's position in a token.
    pub fn position_address(&self, wallet: u32, token: u32) -> String {
        let key = mix(
            self.hash_seed ^ 0x706f_7369_7469_6f6e,
            (u64::from(wallet) << 32) | u64::from(token),
        );
        match self.kind {
            ChainFamily::Altchain => base58_string(key, 44),
            ChainFamily::Evm(_) => hex_string(key, 40),
        }
    }

    /// Market cap of a token at a price, USD (circulating supply × price).
    pub fn mcap(&self, token: u32, price: f64) -> f64 {
        self.tokens[token as usize].circulating_supply * price
    }

    /// The swap at `index` as the wire model (interface 2.8).
    pub fn swap(&self, index: u32) -> Swap {
        self.swap_view(index).map_strings(Cow::into_owned)
    }

    /// [`Self::swap`] with the market's names borrowed, not copied: what a page of swaps
    /// encodes, and what a lake of the market is written from.
    pub fn swap_view(&self, index: u32) -> Swap<Cow<'_, str>> {
        let s = self.record(index);
        let token = &self.tokens[s.token as usize].address;
        let quote = &self.quotes[s.quote as usize].address;
        let usd = s.usd();
        let (swap_type, t_in, t_out, a_in, a_out, p_in, p_out) = if s.buy {
            (
                SwapType::QuoteToken,
                quote,
                token,
                s.quote_amount,
                s.token_amount,
                s.quote_price,
                s.token_price,
            )
        } else {
            (
                SwapType::TokenQuote,
                token,
                quote,
                s.token_amount,
                s.quote_amount,
                s.token_price,
                s.quote_price,
            )
        };
        let (pre_in, post_in, pre_out, post_out) = if s.buy {
            (s.pre_quote, s.post_quote, s.pre_token, s.post_token)
        } else {
            (s.pre_token, s.post_token, s.pre_quote, s.post_quote)
        };
        let pool = &self.pools[s.pool as usize];
        Swap {
            id: self.swap_id(index),
            swap_type,
            protocol: Cow::Borrowed(pool.protocol),
            wallet_address: Cow::Borrowed(&self.wallets[s.wallet as usize].address),
            pool_address: Cow::Borrowed(&pool.address),
            token_address_in: Cow::Borrowed(t_in),
            token_address_out: Cow::Borrowed(t_out),
            token_amount_in: a_in,
            token_amount_out: a_out,
            token_price_in: p_in,
            token_price_out: p_out,
            pre_token_balance_in: pre_in,
            pre_token_balance_out: pre_out,
            post_token_balance_in: post_in,
            post_token_balance_out: post_out,
            usd_amount_in: usd,
            usd_amount_out: usd,
            block_slot: s.slot,
            block_time: utc(s.time),
            tx_hash: Cow::Owned(self.tx_hash(index)),
        }
    }

    /// The trade of the swap at `index`, from the wallet's side (interface 2.9).
    pub fn trade(&self, index: u32) -> Trade {
        self.trade_view(index).map_strings(Cow::into_owned)
    }

    /// [`Self::trade`] with the market's names borrowed, not copied.
    pub fn trade_view(&self, index: u32) -> Trade<Cow<'_, str>> {
        let s = self.record(index);
        let usd = s.usd();
        Trade {
            id: self.swap_id(index),
            protocol: Cow::Borrowed(self.pools[s.pool as usize].protocol),
            swap_type: if s.buy {
                SwapType::QuoteToken
            } else {
                SwapType::TokenQuote
            },
            wallet_address: Cow::Borrowed(&self.wallets[s.wallet as usize].address),
            token_address: Cow::Borrowed(&self.tokens[s.token as usize].address),
            quote_address: Cow::Borrowed(&self.quotes[s.quote as usize].address),
            position_address: Cow::Owned(self.position_address(s.wallet, s.token)),
            direction: if s.buy {
                Direction::Buy
            } else {
                Direction::Sell
            },
            position_state: s.state.model(),
            token_amount: s.token_amount,
            quote_amount: s.quote_amount,
            native_amount: usd / self.native_price(s.time),
            usd_amount: usd,
            pre_token_balance: s.pre_token,
            post_token_balance: s.post_token,
            token_price: s.token_price,
            quote_price: s.quote_price,
            token_mcap: self.mcap(s.token, s.token_price),
            block_slot: s.slot,
            block_time: utc(s.time),
            tx_hash: Cow::Owned(self.tx_hash(index)),
        }
    }

    /// Number of swaps of a token.
    pub fn token_swap_count(&self, token: u32) -> usize {
        self.token_swaps(token).len()
    }
}

/// Sets the quote balances of a record from the wallet's balance before it.
pub(crate) fn fill_quote(r: &mut SwapRecord, pre_quote: f64) {
    r.pre_quote = pre_quote;
    r.post_quote = pre_quote
        + if r.buy {
            -r.quote_amount
        } else {
            r.quote_amount
        };
}

/// The whole synthetic market.
#[derive(Debug)]
pub struct SyntheticMarket {
    /// Seed it was generated from.
    pub seed: u64,
    /// Its scale.
    pub scale: Scale,
    /// The altchain.
    pub alt: Chain,
    /// The EVM chains, by ascending `chain_id`.
    pub evm: Vec<Chain>,
    pub(crate) now: i64,
}

impl SyntheticMarket {
    /// Generates the market of `seed` at `scale`; the same arguments give the same market.
    pub fn generate(seed: u64, scale: Scale) -> SyntheticMarket {
        super::generate::generate(seed, scale)
    }

    /// The same market as [`SyntheticMarket::generate`], stored the way the large scale is: compact
    /// indexes, token streams regenerated on demand. For checking that both storages give
    /// the same answers at a scale that generates quickly.
    pub fn generate_lazy(seed: u64, scale: Scale) -> SyntheticMarket {
        super::generate::generate_with(seed, scale, true)
    }

    /// A live market of `seed` at `scale`: the same history as [`SyntheticMarket::generate`]
    /// (to the byte: the same swaps, ids, balances and answers up to the fixed "now"), followed
    /// by `horizon_days` days of trading after it by the same generators and wallets. The
    /// market itself answers at the fixed "now"; [`SyntheticMarket::at`] takes it at a later
    /// instant. The large and extra-large scales are refused: they keep no streams in memory, and
    /// the swaps after "now" are kept there.
    pub fn generate_live(
        seed: u64,
        scale: Scale,
        horizon_days: u32,
    ) -> crate::Result<SyntheticMarket> {
        if matches!(scale, Scale::Large | Scale::XLarge) {
            return Err(crate::Error::InvalidArgument {
                argument: "scale".into(),
                reason: "a live market keeps its swaps in memory: tiny, small or medium".into(),
            });
        }
        if !(1..=super::live::MAX_HORIZON_DAYS).contains(&horizon_days) {
            return Err(crate::Error::InvalidArgument {
                argument: "horizon days".into(),
                reason: format!(
                    "{horizon_days}: a live market trades for 1 to {} days after now",
                    super::live::MAX_HORIZON_DAYS
                ),
            });
        }
        Ok(super::generate::generate_live(seed, scale, horizon_days))
    }

    /// The simulated "now" the market answers at: the fixed end of the history, the default of
    /// every `to`, or for a market taken with [`SyntheticMarket::at`], that instant.
    pub fn now(&self) -> DateTime<Utc> {
        utc(self.now)
    }

    /// Whether the market goes on trading after the fixed "now" ([`SyntheticMarket::generate_live`]).
    pub fn is_live(&self) -> bool {
        self.alt.live.is_some()
    }

    /// For a live market, the end of its generated trading: no swap happens after it.
    pub fn trading_until(&self) -> Option<DateTime<Utc>> {
        self.alt.live.as_ref().map(|c| utc(c.end))
    }

    /// A live market as it answers at `now` (truncated to the second): every swap with a
    /// block time at or before it, and every derived answer (prices, stats, candles, profiles,
    /// portfolios) computed at it. The result shares the swaps with `self`. `now` must not be
    /// before the fixed "now" (the history is fixed), and the market must be live.
    pub fn at(&self, now: DateTime<Utc>) -> crate::Result<SyntheticMarket> {
        if !self.is_live() {
            return Err(crate::Error::InvalidArgument {
                argument: "market".into(),
                reason: "only a live market (SyntheticMarket::generate_live) moves with a clock"
                    .into(),
            });
        }
        let secs = now.timestamp();
        if secs < super::generate::NOW {
            return Err(crate::Error::InvalidArgument {
                argument: "now".into(),
                reason: format!(
                    "{now} is before the market's fixed now {}; the history does not move",
                    utc(super::generate::NOW)
                ),
            });
        }
        Ok(self.at_secs(secs))
    }

    /// The market at `now`, Unix seconds (see [`SyntheticMarket::at`]; not checked).
    pub(crate) fn at_secs(&self, now: i64) -> SyntheticMarket {
        SyntheticMarket {
            seed: self.seed,
            scale: self.scale,
            alt: self.alt.at(now),
            evm: self.evm.iter().map(|c| c.at(now)).collect(),
            now,
        }
    }

    /// Whether token streams are regenerated on demand (the large scale) rather than kept.
    pub fn is_lazy(&self) -> bool {
        matches!(*self.alt.streams, SwapStreams::Lazy { .. })
    }

    /// The EVM chain with `chain_id`, if the market has it.
    pub fn evm_chain(&self, chain_id: i64) -> Option<&Chain> {
        self.evm
            .iter()
            .find(|c| c.kind == ChainFamily::Evm(chain_id))
    }

    /// Every supported EVM `chain_id`.
    pub fn chain_ids(&self) -> Vec<i64> {
        self.evm
            .iter()
            .filter_map(|c| match c.kind {
                ChainFamily::Evm(id) => Some(id),
                ChainFamily::Altchain => None,
            })
            .collect()
    }
}

/// SplitMix64 finaliser of `a` and `b`: a fast, well-mixed 64-bit hash used for addresses and
/// transaction hashes so they need not be stored.
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a
        .wrapping_add(b.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const BASE58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// A base58 string of `len` characters derived from `key`: each character takes six bits of
/// the hash scaled onto the alphabet (cheap enough to compute per served item).
pub(crate) fn base58_string(key: u64, len: usize) -> String {
    let mut out = Vec::with_capacity(len);
    let mut state = key;
    let mut word = 0u64;
    for i in 0..len {
        if i % 10 == 0 {
            state = mix(state, i as u64);
            word = state;
        }
        out.push(BASE58[(((word & 63) * 58) >> 6) as usize]);
        word >>= 6;
    }
    String::from_utf8(out).expect("the base58 alphabet is ASCII")
}

/// `0x` and `len` lowercase hex digits derived from `key`.
pub(crate) fn hex_string(key: u64, len: usize) -> String {
    const HEX: &[u8] = b"0123456789abcdef";
    let mut out = String::with_capacity(len + 2);
    out.push_str("0x");
    let mut state = key;
    let mut word = 0u64;
    for i in 0..len {
        if i % 16 == 0 {
            state = mix(state, i as u64);
            word = state;
        }
        out.push(HEX[(word & 15) as usize] as char);
        word >>= 4;
    }
    out
}
