//! The chain family a record belongs to.

use std::fmt;
use std::str::FromStr;

/// The chain family of a record: the non-EVM family (paths `/v1/altchain/…`, `block_slot`) or
/// one EVM chain by its numeric `chain_id` (paths `/v1/evm/…`, `block_number`).
///
/// Its text form, `altchain` or `evm-<chain_id>`, is also the lake's `chain=` partition value.
/// Records carry it as a nullable `chain_id` (null for the altchain); [`ChainFamily::from_chain_id`]
/// and [`ChainFamily::chain_id`] convert between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChainFamily {
    /// The non-EVM family (`altchain`).
    Altchain,
    /// An EVM chain by numeric id (`evm-<id>`).
    Evm(i64),
}

impl ChainFamily {
    /// The text form of [`ChainFamily::Altchain`].
    pub const ALTCHAIN: &'static str = "altchain";

    /// The family of a record whose `chain_id` is `chain_id` (`None` for the altchain).
    pub fn from_chain_id(chain_id: Option<i64>) -> Self {
        match chain_id {
            Some(id) => ChainFamily::Evm(id),
            None => ChainFamily::Altchain,
        }
    }

    /// The numeric EVM chain id, `None` for the altchain.
    pub fn chain_id(self) -> Option<i64> {
        match self {
            ChainFamily::Evm(id) => Some(id),
            ChainFamily::Altchain => None,
        }
    }
}

impl fmt::Display for ChainFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainFamily::Altchain => f.pad(Self::ALTCHAIN),
            ChainFamily::Evm(id) => f.pad(&format!("evm-{id}")),
        }
    }
}

impl FromStr for ChainFamily {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == Self::ALTCHAIN {
            return Ok(ChainFamily::Altchain);
        }
        s.strip_prefix("evm-")
            .and_then(|id| id.parse().ok())
            .map(ChainFamily::Evm)
            .ok_or_else(|| {
                format!(
                    "expected `{}` or `evm-<chain_id>`, got {s:?}",
                    Self::ALTCHAIN
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        for family in [
            ChainFamily::Altchain,
            ChainFamily::Evm(1),
            ChainFamily::Evm(8453),
        ] {
            assert_eq!(family.to_string().parse::<ChainFamily>(), Ok(family));
            assert_eq!(ChainFamily::from_chain_id(family.chain_id()), family);
        }
        assert_eq!(ChainFamily::Evm(1).to_string(), "evm-1");
        assert!("evm-x".parse::<ChainFamily>().is_err());
        assert!("solana".parse::<ChainFamily>().is_err());
    }
}
