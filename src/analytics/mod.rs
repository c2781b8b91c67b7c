//! Analytics over the lake: polars and rayon only; reads the lake through
//! [`Lake::scan`](crate::lake::Lake::scan), never the network, and returns polars
//! `DataFrame`s. Results do not depend on the number of threads or on file order.

pub mod metrics;
pub mod pnl;
pub mod token_metrics;
