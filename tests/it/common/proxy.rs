//! A small HTTP/1.1 proxy on loopback in front of a server (the simulator), whose answers a
//! test can delay and whose `Date` header it can rewrite or drop: a stand-in for a slow or
//! odd service.
//!
//! The proxy speaks the least of HTTP/1.1 the client needs: one request per connection
//! (`Connection: close`), bodies of a known length. It is written on bare TCP rather than
//! with axum because hyper adds a `Date` header to every answer that has none, and dropping
//! it is one of the hooks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does to an answer's `Date` header.
#[derive(Debug, Clone, PartialEq)]
pub enum DateRule {
    /// Passes it on as the server sent it.
    Keep,
    /// Leaves it out.
    Drop,
    /// Replaces it with this instant.
    Set(DateTime<Utc>),
    /// Moves it this many seconds (later when positive).
    Shift(i64),
}

/// The hooks of a [`Proxy`], changed by the test while it runs.
#[derive(Debug)]
pub struct Hooks {
    /// Milliseconds each answer is held before it is sent on.
    delay_ms: AtomicU64,
    /// The rule of every answer not taken by `once`.
    date: Mutex<DateRule>,
    /// Rules of the next answers, one each, in order.
    once: Mutex<VecDeque<DateRule>>,
    /// Answers sent on so far.
    answers: AtomicU64,
}

/// A proxy on loopback in front of one server (see the module documentation).
pub struct Proxy {
    base_url: String,
    hooks: Arc<Hooks>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy in front of `upstream` (a base URL such as `http://127.0.0.1:4000`), passing
    /// everything on unchanged until its hooks are set.
    pub async fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let local = listener.local_addr().unwrap();
        let hooks = Arc::new(Hooks {
            delay_ms: AtomicU64::new(0),
            date: Mutex::new(DateRule::Keep),
            once: Mutex::new(VecDeque::new()),
            answers: AtomicU64::new(0),
        });
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let upstream = upstream.trim_end_matches('/').to_owned();
        let task = {
            let hooks = Arc::clone(&hooks);
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    let (hooks, client, upstream) =
                        (Arc::clone(&hooks), client.clone(), upstream.clone());
                    tokio::spawn(async move {
                        // A client that hangs up mid-request (a killed follow) ends only this
                        // connection.
                        let _ = serve(socket, &client, &upstream, &hooks).await;
                    });
                }
            })
        };
        Proxy {
            base_url: format!("http://{local}"),
            hooks,
            task,
        }
    }

    /// The proxy's base URL, to give the client instead of the server's.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Holds each answer this long before sending it on.
    pub fn set_delay(&self, delay: Duration) {
        self.hooks
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    /// The rule of every later answer's `Date` (after those queued by [`Proxy::date_once`]).
    pub fn set_date(&self, rule: DateRule) {
        *self.hooks.date.lock().unwrap() = rule;
    }

    /// The rule of the next answer's `Date` only (queued after earlier ones).
    pub fn date_once(&self, rule: DateRule) {
        self.hooks.once.lock().unwrap().push_back(rule);
    }

    /// Answers sent on so far.
    pub fn answers(&self) -> u64 {
        self.hooks.answers.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request from `socket`, passes it to `upstream` and writes the (rewritten)
/// answer back.
async fn serve(
    mut socket: TcpStream,
    client: &reqwest::Client,
    upstream: &str,
    hooks: &Hooks,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or("GET").to_owned();
    let path = request_line.next().unwrap_or("/").to_owned();
    let mut headers = Vec::new();
    let mut length = 0usize;
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_owned(), value.trim().to_owned());
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(0);
        } else if !["host", "connection"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
        {
            headers.push((name, value));
        }
    }
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let mut request = client.request(
        method.parse().unwrap_or(reqwest::Method::GET),
        format!("{upstream}{path}"),
    );
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let answer = match request.body(body).send().await {
        Ok(answer) => answer,
        Err(e) => {
            let text = format!("proxy: {e}");
            let reply = format!(
                "HTTP/1.1 502 Bad Gateway\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            return socket.write_all(reply.as_bytes()).await;
        }
    };
    let status = answer.status();
    let mut reply = format!(
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let rule = hooks
        .once
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| hooks.date.lock().unwrap().clone());
    for (name, value) in answer.headers() {
        let name = name.as_str();
        if ["content-length", "transfer-encoding", "connection"].contains(&name) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        if name == "date" {
            let date = match &rule {
                DateRule::Keep => Some(value),
                DateRule::Drop => None,
                DateRule::Set(t) => Some(http_date(*t)),
                DateRule::Shift(s) => httpdate::parse_http_date(&value)
                    .ok()
                    .map(|t| http_date(DateTime::<Utc>::from(t) + TimeDelta::seconds(*s))),
            };
            if let Some(d) = date {
                reply.push_str(&format!("date: {d}\r\n"));
            }
            continue;
        }
        reply.push_str(&format!("{name}: {value}\r\n"));
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    reply.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        bytes.len()
    ));
    let delay = hooks.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    hooks.answers.fetch_add(1, Ordering::Relaxed);
    socket.write_all(reply.as_bytes()).await?;
    socket.write_all(&bytes).await?;
    socket.flush().await
}

/// An instant as an HTTP date (`Fri, 01 Jan 2100 00:00:00 GMT`).
pub fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}
