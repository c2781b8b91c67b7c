//! Who may ask: every request, when the server has an access token, carries it as
//! `Authorization: Bearer TOKEN`, the query parameter `access_token=TOKEN` (`token` names
//! the token a question is about), or the cookie a page opened with the parameter was given
//! ([`COOKIE`], so the page's assets, API requests and event stream carry it); without a token (loopback only), a request must name a
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

/// The cookie that carries the access token of a page opened with `access_token=TOKEN`.
pub(super) const COOKIE: &str = "dexlake_access";

/// The `Set-Cookie` value that gives a page `token` (this server's paths only, never sent by
/// another site's request, unreadable by scripts).
pub(super) fn cookie(token: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
    format!("{COOKIE}={encoded}; Path=/; HttpOnly; SameSite=Strict")
}

/// Whether `query` carries the access token as a parameter.
pub(super) fn in_query(query: Option<&str>) -> bool {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes()).any(|(k, _)| k == ACCESS_TOKEN)
}

/// The access token of the request's [`COOKIE`], if it has one.
fn from_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| {
            url::form_urlencoded::parse(format!("v={value}").as_bytes())
                .next()
                .map_or_else(String::new, |(_, v)| v.into_owned())
        })
}

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
            let given = bearer
                .map(str::to_owned)
                .or_else(|| {
                    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                        .find(|(k, _)| k == ACCESS_TOKEN)
                        .map(|(_, v)| v.into_owned())
                })
                .or_else(|| from_cookie(headers));
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

    #[test]
    fn a_cookie_carries_the_token_back() {
        let access = Access::Token("a b;c".into());
        let set = cookie("a b;c");
        let (pair, _) = set.split_once(';').unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, format!("other=1; {pair}").parse().unwrap());
        assert_eq!(refusal(&access, &headers, None), None);
        headers.insert(header::COOKIE, "dexlake_access=wrong".parse().unwrap());
        assert_eq!(refusal(&access, &headers, None).map(|r| r.0), Some(401));
    }
}
