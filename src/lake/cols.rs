//! The names of the lake's columns, one typed place for every reader: a module per dataset (and
//! [`event`] for the columns swaps and trades share), each constant checked against
//! [`schema::record_schema`](super::schema::record_schema) by a test, so a renamed column is a
//! compile error in the readers rather than a missing column at run time.
//!
//! The names are the service's field names; [`schema`](super::schema) holds the types.

/// Declares a module of column names with the datasets whose schemas hold every one of them.
macro_rules! columns {
    ($(#[$doc:meta])* $module:ident: [$($dataset:ident),+] {
        $($(#[$cdoc:meta])* $name:ident = $value:literal,)+
    }) => {
        $(#[$doc])*
        pub(crate) mod $module {
            $($(#[$cdoc])* pub(crate) const $name: &str = $value;)+

            /// The datasets whose schemas hold these columns, and the columns.
            #[cfg(test)]
            pub(super) const ALL: (&[crate::lake::dataset::Dataset], &[&str]) =
                (&[$(crate::lake::dataset::Dataset::$dataset),+], &[$($name),+]);
        }
    };
}

columns! {
    /// Columns of both swaps and trades.
    event: [Swaps, Trades] {
        /// The event's id.
        ID = "id",
        /// The wallet that made the event.
        WALLET = "wallet_address",
        /// The kind of swap (`quote_token`, `token_quote`, `token_token`).
        SWAP_TYPE = "swap_type",
        BLOCK_SLOT = "block_slot",
        /// When the event happened (microseconds, UTC).
        BLOCK_TIME = "block_time",
    }
}

columns! {
    /// Columns of swaps: a sold (`in`) and a bought (`out`) side.
    swap: [Swaps] {
        POOL = "pool_address",
        TOKEN_IN = "token_address_in",
        TOKEN_OUT = "token_address_out",
        AMOUNT_IN = "token_amount_in",
        AMOUNT_OUT = "token_amount_out",
        PRICE_IN = "token_price_in",
        PRICE_OUT = "token_price_out",
        USD_IN = "usd_amount_in",
        USD_OUT = "usd_amount_out",
    }
}

columns! {
    /// Columns of trades: one token side.
    trade: [Trades] {
        TOKEN = "token_address",
        /// `buy` or `sell`.
        DIRECTION = "direction",
        /// `open`, `increase`, `decrease` or `close`.
        POSITION_STATE = "position_state",
        AMOUNT = "token_amount",
        USD = "usd_amount",
        PRICE = "token_price",
        MCAP = "token_mcap",
    }
}

columns! {
    /// The token column of every dataset with one but swaps (whose two sides are
    /// [`swap::TOKEN_IN`](super::swap::TOKEN_IN) and [`swap::TOKEN_OUT`](super::swap::TOKEN_OUT)).
    token: [Trades, PriceHistory, Prices, PriceStats, TokenProfiles, Bars] {
        TOKEN = "token_address",
    }
}

columns! {
    /// Columns of stored bars.
    bar: [Bars] {
        /// The bar's opening time.
        TIMESTAMP = "timestamp",
    }
}

columns! {
    /// Columns of token profiles.
    profile: [TokenProfiles] {
        UPDATED_AT = "updated_at",
        SYNCED_AT = "synced_at",
        FETCHED_AT = "fetched_at",
        CHAIN_ID = "chain_id",
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::record_schema;

    #[test]
    fn every_column_names_a_field_of_its_datasets() {
        let modules = [
            super::event::ALL,
            super::swap::ALL,
            super::trade::ALL,
            super::token::ALL,
            super::bar::ALL,
            super::profile::ALL,
        ];
        for (datasets, columns) in modules {
            for dataset in datasets {
                let schema = record_schema(*dataset);
                for column in columns {
                    assert!(
                        schema.field_with_name(column).is_ok(),
                        "{dataset} has no column {column}"
                    );
                }
            }
        }
    }
}
