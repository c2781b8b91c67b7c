//! The service's vocabulary and the HTTP client: the only code that talks to the service.

pub mod client;
pub mod models;
pub mod profile_query;
pub mod requests;
pub mod retry;

pub use client::{Client, ClientConfig, ClientMetrics};
pub use requests::Operation;
pub use retry::{Permits, RateLimit, RetryConfig};
