//! The simulator of the service: a deterministic synthetic market served over HTTP.
