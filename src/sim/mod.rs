//! The simulator of the service: a deterministic synthetic market served over HTTP.

pub mod search;
