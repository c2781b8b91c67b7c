//! A hostile service: a loopback proxy in front of the simulator that mangles the pages of
//! get-swaps and get-trades the way a real service might (the interface does not define the
//! order of records, nor promise that their times or cursors make sense), and passes every
//! other answer, and every answer's `Date`, through as the simulator sent it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Cursors the proxy makes up start with this; it forwards them as the first page.
const MADE_UP: &str = "hostile-";

/// How the proxy mangles the pages of swaps and trades.
#[derive(Debug, Clone)]
pub enum Mangle {
    /// The newest page (asked for without a cursor) with its records in reverse order.
    ReverseNewestPage,
    /// The newest page with one more record per time: a copy of its first record with a new
    /// id and slot, dated at that time (RFC 3339 text, such as `2099-01-01T00:00:00Z`).
    FutureRecords(Vec<String>),
    /// The newest page with each record twice.
    DuplicateNewestPage,
    /// Every page is the newest page (records already received), announces this `count` and
    /// a cursor never sent before.
    EndlessRepeats {
        /// The `count` every page announces.
        count: i64,
    },
}

/// The proxy; it stops when dropped.
pub struct Hostile {
    url: String,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Hostile {
    /// The base URL to give the client instead of the simulator's.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests the proxy has forwarded.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    target: String,
    http: reqwest::Client,
    mangle: Mangle,
    requests: Arc<AtomicUsize>,
}

fn is_stream(path: &str) -> bool {
    path.ends_with("/get-swaps") || path.ends_with("/get-trades")
}

async fn forward(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.requests.fetch_add(1, Ordering::SeqCst);
    let path = uri.path().to_owned();
    let stream = is_stream(&path);
    let mut request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let first_page = request.get("cursor").is_none_or(Value::is_null);
    if stream
        && let Some(cursor) = request.get("cursor").and_then(Value::as_str)
        && cursor.starts_with(MADE_UP)
        && let Some(object) = request.as_object_mut()
    {
        object.remove("cursor");
    }
    let mut req = shared
        .http
        .post(format!("{}{path}", shared.target))
        .header("content-type", "application/json")
        .body(request.to_string());
    if let Some(key) = headers.get("x-api-key") {
        req = req.header("x-api-key", key.as_bytes());
    }
    let resp = req.send().await.expect("the simulator answers the proxy");
    let status = StatusCode::from_u16(resp.status().as_u16()).expect("a valid status");
    let date = resp.headers().get("date").cloned();
    let text = resp.text().await.expect("the simulator's body is text");
    let mut answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if stream && status.is_success() {
        mangle(&shared.mangle, first_page, &mut answer, &shared.requests);
    }
    let mut response = (
        status,
        [("content-type", "application/json")],
        answer.to_string(),
    )
        .into_response();
    if let Some(date) = date {
        response.headers_mut().insert("date", date);
    }
    response
}

fn mangle(how: &Mangle, first_page: bool, page: &mut Value, requests: &AtomicUsize) {
    let Some(data) = page.get_mut("data").and_then(Value::as_array_mut) else {
        return;
    };
    match how {
        Mangle::ReverseNewestPage => {
            if first_page {
                data.reverse();
            }
        }
        Mangle::DuplicateNewestPage => {
            if first_page {
                let copy = data.clone();
                data.extend(copy);
            }
        }
        Mangle::FutureRecords(times) => {
            if !first_page || data.is_empty() {
                return;
            }
            let max = |name: &str| data.iter().filter_map(|r| r[name].as_i64()).max();
            let (id, slot) = (max("id").unwrap_or(0), max("block_slot").unwrap_or(0));
            let template = data[0].clone();
            for (i, time) in times.iter().enumerate() {
                let mut record = template.clone();
                let step = i as i64 + 1;
                record["id"] = Value::from(id + 1_000_000 * step);
                record["block_slot"] = Value::from(slot + step);
                record["block_time"] = Value::from(time.clone());
                data.insert(0, record);
            }
        }
        Mangle::EndlessRepeats { count } => {
            page["count"] = Value::from(*count);
            let n = requests.load(Ordering::SeqCst);
            page["cursor"] = Value::from(format!("{MADE_UP}{n}"));
        }
    }
}

/// A proxy in front of the simulator at `target` (its base URL) that mangles as `mangle`
/// says, on 127.0.0.1.
pub async fn hostile(target: &str, mangle: Mangle) -> Hostile {
    let requests = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(Shared {
        target: target.trim_end_matches('/').to_owned(),
        http: reqwest::Client::new(),
        mangle,
        requests: Arc::clone(&requests),
    });
    let app = axum::Router::new().fallback(forward).with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Hostile {
        url: format!("http://{addr}"),
        requests,
        task,
    }
}
