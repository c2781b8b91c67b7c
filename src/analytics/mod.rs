//! Analytics over the lake: polars (and rayon) computations on committed files, never the
//! network.
//!
//! * [`search`]: the service's search-profiles request answered locally from cached profile
//!   snapshots, and its filter language as polars expressions.

pub mod search;
