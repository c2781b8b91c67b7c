//! [`Reject`]: a request the simulator refuses, with the status and reason it answers with;
//! the server and the paging of swaps make them.

use crate::error::ApiStatus;

/// A failed request: its status, for 429 the `Retry-After` seconds, and why (kept for
/// [`Simulator::last_rejection`](super::Simulator::last_rejection); the body only ever carries
/// the interface's text).
pub(crate) struct Reject {
    pub(super) status: ApiStatus,
    pub(super) retry_after: Option<u64>,
    pub(super) reason: String,
}

impl Reject {
    pub(crate) fn bad(reason: impl std::fmt::Display) -> Self {
        Reject {
            status: ApiStatus::BadRequest,
            retry_after: None,
            reason: reason.to_string(),
        }
    }

    pub(super) fn status(status: ApiStatus, retry_after: Option<u64>, reason: &str) -> Self {
        Reject {
            status,
            retry_after,
            reason: reason.to_owned(),
        }
    }
}
