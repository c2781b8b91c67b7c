//! `dexlake serve`'s pages and live routes over a lake synced from the `tiny` simulator,
//! served in-process on 127.0.0.1: the pages and assets come from the binary under a fixed
//! table (no path reaches the file system), the access token reaches a page's assets and
//! streams as a cookie, `/api/history` is `dexlake log --format json`, and `/api/events`
//! sends each closed bar once, resuming from the lake after `since` or `Last-Event-ID`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use dexlake::prelude::*;
use dexlake::query::json_rows;
use dexlake::serve::{Access, Feed, Server};
use polars::prelude::{Column, DataFrame};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use crate::common;
use crate::common::lake::bounded;
use crate::serve::{Stopped, cli_json, get, raw, sync_lake};

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A server of the lake at `dir`, with `feed` when given; stopped when the sender is dropped.
fn start(
    rt: &Runtime,
    dir: &Path,
    access: Access,
    feed: Option<Feed>,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let lake = Lake::open_existing(dir).expect("a read-only lake");
    let mut server = rt
        .block_on(Server::bind(
            "127.0.0.1:0".parse().expect("addr"),
            lake,
            access,
        ))
        .expect("bind");
    if let Some(feed) = feed {
        server = server.with_feed(feed);
    }
    let addr = server.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    rt.spawn(server.run(async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// GET `path` with `headers`: the status, the headers and the body as text.
fn fetch(
    rt: &Runtime,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    rt.block_on(async {
        let mut request = reqwest::Client::new().get(format!("http://{addr}{path}"));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().await.expect("a response");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        (status, headers, response.text().await.expect("a body"))
    })
}

#[test]
fn pages_and_assets_come_from_the_binary_and_history_is_the_log() {
    bounded(600, || {
        let rt = runtime();
        let dir = tempfile::tempdir().expect("dir");
        let tokens = rt.block_on(sync_lake(dir.path()));
        let a = tokens[0].as_str();
        let (addr, _stop) = start(&rt, dir.path(), Access::Open, None);

        for (path, script) in [
            ("/", "lake"),
            (&format!("/token/{a}") as &str, "token"),
            ("/wallet/W1", "wallet"),
            ("/leaderboard", "leaderboard"),
            ("/screener", "screener"),
        ] {
            let (status, headers, body) = fetch(&rt, addr, path, &[]);
            assert_eq!(status, 200, "{path}: {body}");
            assert!(
                headers["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("text/html")
            );
            assert!(
                headers["content-security-policy"]
                    .to_str()
                    .unwrap()
                    .contains("default-src 'self'")
            );
            assert!(body.contains(&format!("/assets/{script}.js")), "{path}");
            assert!(!body.contains("{{"), "{path}: a placeholder left");
            let (status, headers, js) = fetch(&rt, addr, &format!("/assets/{script}.js"), &[]);
            assert_eq!(status, 200);
            assert!(
                headers["content-type"]
                    .to_str()
                    .unwrap()
                    .contains("javascript")
            );
            assert!(js.contains("dx."), "{script}.js");
        }
        let (status, _, chart) = fetch(&rt, addr, "/assets/lightweight-charts.js", &[]);
        assert_eq!(status, 200);
        assert!(chart.contains("TradingView Lightweight Charts"));
        let (status, _, licence) = fetch(&rt, addr, "/assets/lightweight-charts.LICENSE", &[]);
        assert_eq!(status, 200);
        assert!(licence.contains("Apache License"));

        // Only the table's names: no file is named by a request.
        for path in [
            "/assets/nothing.js",
            "/assets/..%2f..%2fCargo.toml",
            "/assets/../Cargo.toml",
            "/assets/vendor/LICENSE",
            "/assets/page.html",
            "/token",
            "/token/A/B",
        ] {
            let (status, body) = raw(addr, path, "127.0.0.1");
            assert_eq!(status, 404, "{path}: {body}");
            let body: Value = serde_json::from_str(&body).expect("JSON");
            assert_eq!(body["status"], 404);
        }
        let (status, _, body) = fetch(&rt, addr, "/token/%20", &[]);
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("invalid token: an empty address"), "{body}");
        let (status, body) = raw(addr, "/", "example.com");
        assert_eq!(status, 403, "{body}");

        // History: `dexlake log --format json`, filtered by dataset as `--dataset`.
        let lake = Lake::open_existing(dir.path()).expect("lake");
        let d = dir.path();
        let (status, body) = get(&rt, addr, "/api/history", None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["version"], json!(lake.version().expect("version")));
        assert_eq!(body["data"], cli_json(d, &["log", "--format", "json"]));
        assert!(
            body["data"]["records"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        );
        let (status, body) = get(&rt, addr, "/api/history?dataset=trades", None);
        assert_eq!(status, 200, "{body}");
        let cli = cli_json(d, &["log", "--dataset", "trades", "--format", "json"]);
        assert_eq!(body["data"], cli);
        let (status, body) = get(&rt, addr, "/api/history?dataset=nope", None);
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains("nope"), "{body}");

        // A server that follows nothing says so, and has no stream.
        let (status, body) = get(&rt, addr, "/api/follow", None);
        assert_eq!(status, 200);
        assert_eq!(body["following"], false);
        let (status, body) = get(&rt, addr, &format!("/api/events?token={a}"), None);
        assert_eq!(status, 404, "{body}");
        assert!(
            body["error"].as_str().unwrap().contains("--follow"),
            "{body}"
        );
    });
}

#[test]
fn a_token_in_the_link_reaches_the_assets_and_streams_as_a_cookie() {
    bounded(600, || {
        let rt = runtime();
        let dir = tempfile::tempdir().expect("dir");
        let tokens = rt.block_on(sync_lake(dir.path()));
        let a = tokens[0].as_str();
        let feed = Feed::new(&tokens, 60, None).expect("feed");
        let (addr, _stop) = start(&rt, dir.path(), Access::Token("s3cret".into()), Some(feed));

        for path in ["/", "/assets/common.js", "/api/follow", "/api/status"] {
            let (status, _, body) = fetch(&rt, addr, path, &[]);
            assert_eq!(status, 401, "{path}: {body}");
        }
        let (status, headers, _) = fetch(&rt, addr, "/token/A?access_token=s3cret", &[]);
        assert_eq!(status, 200);
        let cookie = headers["set-cookie"].to_str().expect("a cookie").to_owned();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        let pair = cookie.split(';').next().expect("name=value");
        for path in ["/assets/common.js", "/api/follow"] {
            let (status, _, body) = fetch(&rt, addr, path, &[("cookie", pair)]);
            assert_eq!(status, 200, "{path}: {body}");
        }
        let (status, _, body) = fetch(
            &rt,
            addr,
            "/api/follow",
            &[("cookie", "dexlake_access=guess")],
        );
        assert_eq!(status, 401, "{body}");
        // The stream is checked as every route is (a stream answered is read to its first
        // event only).
        let (status, _) = raw(addr, &format!("/api/events?token={a}"), "127.0.0.1");
        assert_eq!(status, 401);
        let events = rt.block_on(async {
            let mut stream =
                Stream::open(addr, &format!("/api/events?token={a}"), Some(pair)).await;
            stream.next(1).await
        });
        assert_eq!(events[0].0, "hello");
    });
}

/// An event stream read event by event: (event, id, data).
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(addr: SocketAddr, path: &str, cookie: Option<&str>) -> Stream {
        Self::open_with(addr, path, cookie, None).await
    }

    async fn open_with(
        addr: SocketAddr,
        path: &str,
        cookie: Option<&str>,
        last_id: Option<&str>,
    ) -> Stream {
        let mut request = reqwest::Client::new().get(format!("http://{addr}{path}"));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        if let Some(id) = last_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.expect("a response");
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Stream {
            response,
            buffer: String::new(),
        }
    }

    /// The next `n` events (comments skipped), waiting at most a minute.
    async fn next(&mut self, n: usize) -> Vec<(String, Option<String>, Value)> {
        let mut events = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), async {
            while events.len() < n {
                if let Some(at) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..at + 2).collect();
                    let (mut event, mut id, mut data) = (String::from("message"), None, None);
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("event:") {
                            event = v.trim().to_owned();
                        } else if let Some(v) = line.strip_prefix("id:") {
                            id = Some(v.trim().to_owned());
                        } else if let Some(v) = line.strip_prefix("data:") {
                            data = Some(serde_json::from_str(v.trim()).expect("JSON data"));
                        }
                    }
                    if let Some(data) = data {
                        events.push((event, id, data));
                    }
                    continue;
                }
                let chunk = self
                    .response
                    .chunk()
                    .await
                    .expect("the stream")
                    .expect("open");
                self.buffer
                    .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
            }
        })
        .await
        .expect("the events within a minute");
        events
    }
}

/// Unix seconds of a row's `timestamp`.
fn time_of(row: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(row["timestamp"].as_str().expect("a time"))
        .expect("RFC 3339")
        .timestamp()
}

#[test]
fn events_resume_from_the_lake_and_send_each_bar_once() {
    bounded(600, || {
        let rt = runtime();
        let dir = tempfile::tempdir().expect("dir");
        let tokens = rt.block_on(sync_lake(dir.path()));
        let a = tokens[0].clone();
        let lake = Lake::open_existing(dir.path()).expect("lake");
        let mut frame: DataFrame = lake
            .query()
            .token(a.as_str())
            .bars_covered(Bars::every(60))
            .expect("bars")
            .value;
        let n = frame.height();
        assert!(n >= 10, "{n} bars");
        if frame.column("token_address").is_err() {
            frame
                .insert_column(0, Column::new("token_address".into(), vec![a.clone(); n]))
                .expect("a column");
        }
        let rows = json_rows(&frame).expect("rows");
        let times: Vec<i64> = rows.iter().map(time_of).collect();
        let at = |t: i64| chrono::DateTime::from_timestamp(t, 0).expect("a time");
        // The follow has closed every bar before the one at n - 4.
        let feed = Feed::new(&tokens, 60, Some(at(times[n - 4]))).expect("feed");
        let (addr, _stop) = start(&rt, dir.path(), Access::Open, Some(feed.clone()));
        let (status, body) = get(&rt, addr, "/api/follow", None);
        assert_eq!(status, 200);
        assert_eq!(body["following"], true);
        assert_eq!(body["interval"], 60);

        // A page's first load, the bars up to the watermark's, is the stream's catch-up below:
        // the bar before the watermark is complete in both (the watermark is the data's end).
        let path = format!(
            "/api/bars?token={a}&interval=60&from={}&to={}",
            times[3],
            times[n - 4]
        );
        let (status, body) = get(&rt, addr, &path, None);
        assert_eq!(status, 200, "{body}");
        let page = body["data"].as_array().expect("rows");
        assert_eq!(page.len(), n - 7);
        assert_eq!(page[n - 8]["incomplete"], false, "{}", page[n - 8]);
        for (i, row) in page.iter().enumerate() {
            let strip = |row: &Value| {
                let mut row = row.clone();
                row.as_object_mut().expect("a row").remove("token_address");
                row
            };
            assert_eq!(strip(row), strip(&rows[3 + i]));
        }

        rt.block_on(async {
            // After the bar at 2: the lake's bars 3 ..= n - 5, each with its time as its id.
            let path = format!("/api/events?token={a}&since={}", times[2]);
            let mut stream = Stream::open(addr, &path, None).await;
            let got = stream.next(1 + (n - 7) + 1).await;
            assert_eq!(got[0].0, "hello");
            let bars = &got[1..got.len() - 1];
            for (i, (event, id, data)) in bars.iter().enumerate() {
                assert_eq!(event, "bar");
                assert_eq!(id.as_deref(), Some(times[3 + i].to_string().as_str()));
                let mut expected = rows[3 + i].clone();
                expected
                    .as_object_mut()
                    .expect("a row")
                    .remove("token_address");
                let mut data = data.clone();
                data.as_object_mut().expect("a row").remove("token_address");
                assert_eq!(data, expected);
            }
            assert_eq!(got.last().expect("openbar").0, "openbar");

            // A poll closes the bars at n - 4 and n - 3; the next repeats n - 3 (as a
            // restarted follower does): each is sent once.
            feed.publish(
                &frame.slice((n - 4) as i64, 2),
                &frame.slice(0, 0),
                Some(at(times[n - 2])),
            )
            .expect("publish");
            feed.publish(
                &frame.slice((n - 3) as i64, 2),
                &frame.slice(0, 0),
                Some(at(times[n - 1])),
            )
            .expect("publish");
            let got = stream.next(5).await;
            let kinds: Vec<&str> = got.iter().map(|e| e.0.as_str()).collect();
            assert_eq!(kinds, ["bar", "bar", "openbar", "bar", "openbar"]);
            let ids: Vec<i64> = got
                .iter()
                .filter_map(|e| e.1.as_deref().map(|i| i.parse().expect("a number")))
                .collect();
            assert_eq!(ids, [times[n - 4], times[n - 3], times[n - 2]]);

            // A page that reconnects after the bar at n - 4 gets n - 3 and n - 2 from the
            // lake (the watermark is past them), and nothing twice.
            let path = format!("/api/events?token={a}&since=0");
            let id = times[n - 4].to_string();
            let mut again = Stream::open_with(addr, &path, None, Some(&id)).await;
            let got = again.next(4).await;
            let kinds: Vec<&str> = got.iter().map(|e| e.0.as_str()).collect();
            assert_eq!(kinds, ["hello", "bar", "bar", "openbar"]);
            assert_eq!(got[1].1.as_deref(), Some(times[n - 3].to_string().as_str()));
            assert_eq!(got[2].1.as_deref(), Some(times[n - 2].to_string().as_str()));
        });

        // Bad parameters are 400s before any stream opens.
        for (path, needle) in [
            (format!("/api/events?token={a}&since=soon"), "invalid since"),
            ("/api/events".to_owned(), "give the token"),
            (
                format!("/api/events?token={a}&colour=red"),
                "not a parameter",
            ),
        ] {
            let (status, body) = get(&rt, addr, &path, None);
            assert_eq!(status, 400, "{path}: {body}");
            assert!(body["error"].as_str().unwrap().contains(needle), "{body}");
        }
        let (status, body) = get(&rt, addr, "/api/events?token=NOTFOLLOWED", None);
        assert_eq!(status, 404, "{body}");
    });
}

/// `dexlake serve --as-of 1` serves the lake as it was at version 1 (status and history), and
/// `--as-of` with `--follow` is refused before anything listens.
#[test]
fn the_command_serves_a_pinned_lake() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("dir");
        let lake_dir = dir.path().join("lake");
        let lake_arg = lake_dir.to_str().expect("path");
        common::dexlake_cli(&["fixture-lake", lake_arg, "--rows", "200"]);
        let newest = Lake::open_existing(&lake_dir)
            .and_then(|l| l.version())
            .expect("version");
        assert!(newest >= 2, "the fixture lake has {newest} versions");
        let mut child = Stopped(
            std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
                .args([
                    "--lake",
                    lake_arg,
                    "serve",
                    "--addr",
                    "127.0.0.1:0",
                    "--as-of",
                    "1",
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("dexlake serve starts"),
        );
        let mut first = String::new();
        let stdout = child.0.stdout.take().expect("stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first)
            .expect("the banner");
        let addr: SocketAddr = first
            .trim()
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.strip_suffix("/api/"))
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("banner: {first:?}"));
        let rt = runtime();
        let (status, body) = get(&rt, addr, "/api/status", None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["version"], 1);
        let (status, body) = get(&rt, addr, "/api/history", None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["version"], 1);
        let versions: Vec<&Value> = body["data"]["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| &r["version"])
            .collect();
        assert_eq!(versions, [&json!(1)]);
        drop(child);

        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .args(["--lake", lake_arg, "--base-url", "http://127.0.0.1:9"])
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--as-of",
                "1",
                "--follow",
                "A",
            ])
            .output()
            .expect("dexlake serve runs");
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--as-of pins the lake"), "{err}");
    });
}
