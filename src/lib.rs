//! # dexlake
//!
//! An embedded analytics engine over cached DEX market data.
#![warn(missing_docs)]

pub mod api;
pub mod error;
pub mod lake;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sync;

pub use error::{ApiStatus, Error, Result};
