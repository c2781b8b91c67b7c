//! The HTTP client of the service.
