//! The catalog of a market: its tokens, pools and wallets, most active first, and its "now"
//! (the `--catalog` JSON).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::market::{Behaviour, Chain, SyntheticMarket, utc};
use crate::api::models::ChainFamily;

impl Chain {
    /// This chain's part of the catalog, as far as the clock has reached.
    pub(crate) fn catalog(&self) -> CatalogChain {
        let mut order: Vec<u32> = (0..self.tokens.len() as u32).collect();
        order.sort_by_key(|&t| (std::cmp::Reverse(self.token_swap_count(t)), t));
        let tokens = order
            .iter()
            .map(|&t| {
                let info = &self.tokens[t as usize];
                CatalogToken {
                    address: info.address.clone(),
                    symbol: info.symbol.clone(),
                    name: info.name.clone(),
                    created_at: utc(info.created_at),
                    creator: info.creator.clone(),
                    socials: [
                        ("twitter", &info.twitter),
                        ("discord", &info.discord),
                        ("website", &info.website),
                        ("telegram", &info.telegram),
                    ]
                    .into_iter()
                    .filter_map(|(k, v)| v.clone().map(|v| (k.to_owned(), v)))
                    .collect(),
                    pools: info
                        .pools
                        .iter()
                        .map(|&p| self.pools[p as usize].address.clone())
                        .collect(),
                    swap_count: self.token_swap_count(t) as u64,
                }
            })
            .collect();
        let mut pool_order: Vec<u32> = (0..self.pools.len() as u32).collect();
        pool_order.sort_by_key(|&p| (std::cmp::Reverse(self.pool_swaps(p).len()), p));
        let pools = pool_order
            .iter()
            .map(|&p| {
                let info = &self.pools[p as usize];
                CatalogPool {
                    address: info.address.clone(),
                    token: self.tokens[info.token as usize].address.clone(),
                    quote: self.quotes[info.quote as usize].address.clone(),
                    protocol: info.protocol.to_owned(),
                    swap_count: self.pool_swaps(p).len() as u64,
                }
            })
            .collect();
        let mut wallet_order: Vec<u32> = (0..self.wallets.len() as u32).collect();
        wallet_order.sort_by_key(|&w| (std::cmp::Reverse(self.wallet_swaps(w).len()), w));
        let wallets = wallet_order
            .iter()
            .map(|&w| {
                let info = &self.wallets[w as usize];
                CatalogWallet {
                    address: info.address.clone(),
                    behaviour: info.behaviour,
                    swap_count: self.wallet_swaps(w).len() as u64,
                }
            })
            .collect();
        CatalogChain {
            tokens,
            pools,
            wallets,
        }
    }
}

impl SyntheticMarket {
    /// The market's tokens, pools and wallets (the `--catalog` JSON), most active first.
    pub fn catalog(&self) -> Catalog {
        Catalog {
            evm: self
                .evm
                .iter()
                .filter_map(|c| match c.kind {
                    ChainFamily::Evm(id) => Some((id.to_string(), c.catalog())),
                    ChainFamily::Altchain => None,
                })
                .collect(),
            altchain: self.alt.catalog(),
            now: self.now(),
            live: self
                .trading_until()
                .map(|trading_until| CatalogLive { trading_until }),
        }
    }
}

/// The market as JSON: `{"evm": {"<chain_id>": ...}, "altchain": ..., "now": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct Catalog {
    /// EVM chains by decimal `chain_id`.
    pub evm: BTreeMap<String, CatalogChain>,
    /// The altchain.
    pub altchain: CatalogChain,
    /// The simulated "now" the catalog was taken at.
    pub now: DateTime<Utc>,
    /// For a live market: when it stops trading. Absent for a fixed market.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<CatalogLive>,
}

/// The live part of a catalog.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogLive {
    /// End of the generated trading: no swap happens after it, though the clock goes on.
    pub trading_until: DateTime<Utc>,
}

/// One chain of the catalog.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogChain {
    /// Tokens, most swapped first.
    pub tokens: Vec<CatalogToken>,
    /// Pools, most swapped first.
    pub pools: Vec<CatalogPool>,
    /// Wallets, most active first.
    pub wallets: Vec<CatalogWallet>,
}

/// A token of the catalog.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogToken {
    /// Address.
    pub address: String,
    /// Ticker symbol.
    pub symbol: String,
    /// Display name.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Creator's address.
    pub creator: String,
    /// Social links present for the token, by kind (`twitter`, `discord`, ...).
    pub socials: BTreeMap<String, String>,
    /// Addresses of its pools.
    pub pools: Vec<String>,
    /// Number of swaps.
    pub swap_count: u64,
}

/// A pool of the catalog.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogPool {
    /// Address.
    pub address: String,
    /// Token address.
    pub token: String,
    /// Quote token address.
    pub quote: String,
    /// DEX protocol.
    pub protocol: String,
    /// Number of swaps.
    pub swap_count: u64,
}

/// A wallet of the catalog.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogWallet {
    /// Address.
    pub address: String,
    /// How it trades.
    pub behaviour: Behaviour,
    /// Number of swaps.
    pub swap_count: u64,
}
