//! Retries with backoff and the request permits.
