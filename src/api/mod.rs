//! The service's vocabulary and the HTTP client: the only code that talks to the service.

pub mod client;
pub mod models;
pub mod requests;
pub mod retry;
pub mod search;
