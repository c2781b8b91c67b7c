//! [`Query::check`]: the lake's data-quality findings, within what its syncs fetched.

use super::{Query, refused};
use crate::Result;
use crate::analytics::TimeRange;
use crate::analytics::quality::{self, CheckOptions, CheckReport};

impl Query<'_> {
    /// The data-quality findings (gaps, price jumps, candles against bars, repeated ids, slot
    /// times, gaps and jumps in the stored series) of the selected tokens, or of every token,
    /// with `examples` examples of each kind; `progress` is told each step as it starts. Gaps
    /// and the candles' comparison stay inside what the syncs fetched completely. A check
    /// selects tokens only: a pool, a wallet, a time range or a stored series is refused.
    pub fn check(&self, examples: usize, progress: &dyn Fn(&str)) -> Result<CheckReport> {
        if self.pool.is_some() || self.wallets.is_some() || self.range != TimeRange::default() {
            return Err(refused(
                "selection",
                "a check selects tokens only: select no pool, wallet or time range",
            ));
        }
        self.events_only("checks")?;
        self.no_blank_address()?;
        let ranges = crate::coverage::check_ranges(self.lake)?;
        let options = CheckOptions {
            tokens: self.tokens.clone(),
            examples,
            fetched: ranges.swaps,
            candles_fetched: ranges.candles,
            history_fetched: ranges.price_history,
            events_at_once: self.events_at_once,
            ..CheckOptions::default()
        };
        quality::check_with(self.lake, &options, progress)
    }
}
