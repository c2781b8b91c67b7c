//! Pages of swaps and trades: newest first, with opaque keyset cursors on `(block_slot, id)`.

use super::market::{Chain, IndexList};
use super::reject::Reject;
use crate::api::requests::DEFAULT_LIMIT;

/// One page of swaps (or their trades), newest first.
pub(crate) struct SwapPage {
    pub(crate) count: i64,
    pub(crate) items: Vec<u32>,
    pub(crate) cursor: Option<String>,
}

const CURSOR_MASK_SLOT: u64 = 0x5A5A_C3C3_0F0F_9696;
const CURSOR_MASK_ID: u64 = 0x3C3C_A5A5_F0F0_6969;

/// Encodes the keyset `(block_slot, id)` of the last item of a page.
fn encode_cursor(slot: i64, id: i64) -> String {
    format!(
        "{:016x}{:016x}",
        slot as u64 ^ CURSOR_MASK_SLOT,
        id as u64 ^ CURSOR_MASK_ID
    )
}

/// Decodes a cursor to the key of the swap it names; anything else is a 400.
fn decode_cursor(chain: &Chain, cursor: &str) -> Result<(i64, i64), Reject> {
    if cursor.len() != 32 || !cursor.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Reject::bad(
            "the cursor is not one of this service's cursors",
        ));
    }
    let slot = u64::from_str_radix(&cursor[..16], 16).map_err(Reject::bad)? ^ CURSOR_MASK_SLOT;
    let id = u64::from_str_radix(&cursor[16..], 16).map_err(Reject::bad)? ^ CURSOR_MASK_ID;
    let index = chain
        .swap_index(id as i64)
        .ok_or_else(|| Reject::bad("the cursor names no swap"))?;
    let key = chain.key(index);
    if key.0 != slot as i64 {
        return Err(Reject::bad("the cursor's slot does not match its swap"));
    }
    Ok(key)
}

/// Pages through the swaps matching every given filter, newest first. The narrowest index
/// is walked backwards from the cursor by binary search; the other filters are checked per
/// swap. An unknown address matches nothing.
pub(crate) fn page_of(
    chain: &Chain,
    wallet: Option<&str>,
    token: Option<&str>,
    pool: Option<&str>,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> Result<SwapPage, Reject> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT) as usize;
    let before = cursor.map(|c| decode_cursor(chain, c)).transpose()?;
    let empty = SwapPage {
        count: 0,
        items: Vec::new(),
        cursor: None,
    };
    let mut lists: Vec<IndexList<'_>> = Vec::new();
    let wallet = match wallet {
        Some(w) => match chain.wallet_index(w) {
            Some(i) => {
                lists.push(chain.wallet_swaps(i));
                Some(i)
            }
            None => return Ok(empty),
        },
        None => None,
    };
    let token = match token {
        Some(t) => match chain.token_index(t) {
            Some(i) => {
                lists.push(chain.token_swaps(i));
                Some(i)
            }
            None => return Ok(empty),
        },
        None => None,
    };
    let pool = match pool {
        Some(p) => match chain.pool_index(p) {
            Some(i) => {
                lists.push(chain.pool_swaps(i));
                Some(i)
            }
            None => return Ok(empty),
        },
        None => None,
    };
    let Some(base) = lists.iter().min_by_key(|l| l.len()).copied() else {
        return Ok(empty);
    };
    let single = lists.len() == 1;
    let matches = |i: u32| {
        if single {
            return true;
        }
        if token.is_some_and(|t| chain.token_of(i) != t) {
            return false;
        }
        if wallet.is_none() && pool.is_none() {
            return true;
        }
        let s = chain.record(i);
        wallet.is_none_or(|w| s.wallet == w) && pool.is_none_or(|p| s.pool == p)
    };
    let count = if single {
        base.len()
    } else {
        (0..base.len())
            .filter(|&pos| matches(base.get(pos)))
            .count()
    };
    // The page ends before the first swap (in event order) at or after the cursor's.
    let end = match before {
        Some(key) => {
            let (mut lo, mut hi) = (0usize, base.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if chain.key(base.get(mid)) < key {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        }
        None => base.len(),
    };
    let mut items: Vec<u32> = (0..end)
        .rev()
        .map(|pos| base.get(pos))
        .filter(|&i| matches(i))
        .take(limit + 1)
        .collect();
    let more = items.len() > limit;
    items.truncate(limit);
    let cursor = if more {
        items.last().map(|&i| {
            let (slot, id) = chain.key(i);
            encode_cursor(slot, id)
        })
    } else {
        None
    };
    Ok(SwapPage {
        count: count as i64,
        items,
        cursor,
    })
}
