//! Who may ask: every request, when the server has an access token, carries it as
//! `Authorization: Bearer TOKEN` or the query parameter `access_token=TOKEN` (`token` names
//! the token a question is about); without a token (loopback only), a request must name a
//! loopback host, so a web page of another site cannot reach the API by rebinding its name.

use axum::http::{HeaderMap, header};
use rand::Rng as _;

/// Whether the server checks an access token.
#[derive(Clone, PartialEq, Eq)]
pub enum Access {
    /// No token (loopback addresses only): a request must name a loopback host.
    Open,
    /// Every request must carry this token.
    Token(String),
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Open => f.write_str("Open"),
            // The token is a secret: never in a log.
            Access::Token(_) => f.write_str("Token(…)"),
        }
    }
}

/// The query parameter that carries the access token.
pub(super) const ACCESS_TOKEN: &str = "access_token";

/// A fresh access token: 32 random bytes from the thread's cryptographically secure
/// generator (seeded by the operating system), as 64 hexadecimal digits.
pub fn generate_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a request is refused, if it is: 401 (no or another token) or 403 (a host that is not
/// loopback on an open server).
pub(super) fn refusal(
    access: &Access,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Option<(u16, String)> {
    match access {
        Access::Token(token) => {
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let given = bearer.map(str::to_owned).or_else(|| {
                url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                    .find(|(k, _)| k == ACCESS_TOKEN)
                    .map(|(_, v)| v.into_owned())
            });
            match given {
                Some(given) if same(given.as_bytes(), token.as_bytes()) => None,
                Some(_) => Some((401, "the access token is not this server's".into())),
                None => Some((
                    401,
                    "this server needs its access token: `Authorization: Bearer TOKEN` or \
                     `access_token=TOKEN`"
                        .into(),
                )),
            }
        }
        Access::Open => {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
            match host {
                Some(host) if loopback_host(host) => None,
                _ => Some((
                    403,
                    "a server without an access token answers requests to a loopback host \
                     (localhost, 127.0.0.1, [::1]) only"
                        .into(),
                )),
            }
        }
    }
}

/// Whether a `Host` header names a loopback host (any port).
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]:8000`
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Compares two byte strings in a time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_named_or_numbered() {
        for host in [
            "localhost",
            "LOCALHOST:8000",
            "127.0.0.1:1",
            "127.3.2.1",
            "[::1]:8000",
        ] {
            assert!(loopback_host(host), "{host}");
        }
        for host in [
            "example.com",
            "10.0.0.1:80",
            "[::2]:80",
            "localhost.evil.com",
            "",
        ] {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn tokens_are_long_fresh_and_compared_whole() {
        let (a, b) = (generate_token(), generate_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(same(a.as_bytes(), a.clone().as_bytes()));
        assert!(!same(a.as_bytes(), &a.as_bytes()[..63]));
        assert!(!same(a.as_bytes(), b.as_bytes()));
    }
}
