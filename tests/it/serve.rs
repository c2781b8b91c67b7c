//! `dexlake serve`'s JSON API over a lake synced from the `tiny` simulator, served in-process on
//! 127.0.0.1: each answer is the query's answer for the same arguments and the CLI's
//! `--format json` for the same flags; bad parameters, no data, oversize requests, the access
//! token, a damaged file and paths that try to leave the API are refused with their status.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dexlake::lake::Dataset;
use dexlake::prelude::*;
use dexlake::query::json_rows;
use dexlake::serve::{Access, Server};
use dexlake::sync::{Job, SyncConfig, Syncer};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use crate::common;
use crate::common::lake::bounded;

/// Syncs the swaps and trades of the tiny market's first two tokens and one profile snapshot
/// into `dir`; the two tokens.
pub(crate) async fn sync_lake(dir: &Path) -> Vec<String> {
    let sim = common::tiny_sim(7).await;
    let tokens: Vec<String> = sim.market().catalog().altchain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let lake = Arc::new(Lake::open(dir).expect("lake"));
    let mut jobs = Vec::new();
    for t in &tokens {
        jobs.push(Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        });
        jobs.push(Job::Trades {
            token: Some(t.clone()),
            wallet: None,
        });
    }
    let request =
        serde_json::from_value(json!({"options": {"include_market": true}, "limit": 100}))
            .expect("request");
    jobs.push(Job::AltProfiles { request });
    let syncer = Syncer::new(common::sim_client(&sim), lake, SyncConfig::default());
    let report = syncer.run(&jobs).await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
    sim.shutdown().await;
    tokens
}

/// A server of the lake at `dir` on 127.0.0.1 (port chosen by the system), stopped when the
/// sender is dropped.
fn start(
    rt: &Runtime,
    dir: &Path,
    access: Access,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let lake = Lake::open_existing(dir).expect("a read-only lake");
    let server = rt
        .block_on(Server::bind(
            "127.0.0.1:0".parse().expect("addr"),
            lake,
            access,
        ))
        .expect("bind");
    let addr = server.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    rt.spawn(server.run(async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// GET `path` (with its query) of the server; the status and the JSON body.
pub(crate) fn get(
    rt: &Runtime,
    addr: SocketAddr,
    path: &str,
    bearer: Option<&str>,
) -> (u16, Value) {
    rt.block_on(async {
        let mut request = reqwest::Client::new().get(format!("http://{addr}{path}"));
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("a response");
        let status = response.status().as_u16();
        let body: Value = response.json().await.expect("a JSON body");
        (status, body)
    })
}

/// The status and body of a request written by hand (its path as given, not normalised as an
/// HTTP client would), with `host` as its `Host`.
pub(crate) fn raw(addr: SocketAddr, path: &str, host: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

/// The CLI's `--format json` rows (or document) for `args` on the lake at `dir`.
pub(crate) fn cli_json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--lake", dir.to_str().expect("a UTF-8 path")];
    all.extend(args);
    let out = common::dexlake_cli(&all);
    serde_json::from_str(&out).expect("the CLI's JSON")
}

/// The CLI's one-line error (`error: ` removed) for `args` on the lake at `dir`.
fn cli_error(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(dir)
        .args(args)
        .output()
        .expect("the dexlake binary runs");
    assert!(!out.status.success(), "{args:?} succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| panic!("no error line in {err}"))
        .to_owned()
}

/// The JSON of an answer's warnings, as the API writes them.
fn warnings<T>(answer: &Answer<T>) -> Value {
    answer
        .warnings
        .iter()
        .map(|w| json!({"kind": w.kind.name(), "text": w.text}))
        .collect()
}

#[test]
fn each_route_answers_as_the_query_and_the_cli() {
    bounded(600, || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("dir");
        let tokens = rt.block_on(sync_lake(dir.path()));
        let (a, b) = (tokens[0].as_str(), tokens[1].as_str());
        let (addr, _stop) = start(&rt, dir.path(), Access::Open);
        let lake = Lake::open_existing(dir.path()).expect("lake");
        let d = dir.path();

        // Bars: the query's answer (rows, version, coverage, warnings) and the CLI's JSON.
        let (status, body) = get(&rt, addr, &format!("/api/bars?token={a}&interval=60"), None);
        assert_eq!(status, 200, "{body}");
        let answer = lake
            .query()
            .token(a)
            .bars_covered(Bars::every(60))
            .expect("bars");
        assert!(answer.value.height() > 0);
        assert_eq!(
            body["data"],
            Value::Array(json_rows(&answer.value).expect("rows"))
        );
        assert_eq!(body["version"], json!(answer.version));
        assert_eq!(
            body["coverage"],
            serde_json::to_value(&answer.coverage).expect("json")
        );
        assert_eq!(body["warnings"], warnings(&answer));
        let cli = cli_json(
            d,
            &[
                "ohlcv",
                "--token",
                a,
                "--interval",
                "60",
                "--format",
                "json",
            ],
        );
        assert_eq!(body["data"], cli);

        // Time options and event bars, by the CLI's flag names.
        let cases: [(&str, &[&str]); 3] = [
            (
                "tokens={a},{b}&interval=3600&fill=ffill&offset=900&closed=right&label=right&source=trades",
                &[
                    "--tokens",
                    "{a},{b}",
                    "--interval",
                    "3600",
                    "--fill",
                    "ffill",
                    "--offset",
                    "900",
                    "--closed",
                    "right",
                    "--label",
                    "right",
                    "--source",
                    "trades",
                ],
            ),
            ("token={a}&ticks=25", &["--token", "{a}", "--ticks", "25"]),
            (
                "token={b}&usd_volume=5000&from=2025-05-20T00:00:00Z",
                &[
                    "--token",
                    "{b}",
                    "--usd-volume",
                    "5000",
                    "--from",
                    "2025-05-20T00:00:00Z",
                ],
            ),
        ];
        for (params, flags) in cases {
            let params = params.replace("{a}", a).replace("{b}", b);
            let (status, body) = get(&rt, addr, &format!("/api/bars?{params}"), None);
            assert_eq!(status, 200, "{params}: {body}");
            assert!(
                !body["data"].as_array().expect("rows").is_empty(),
                "{params}"
            );
            let mut args = vec!["ohlcv".to_owned()];
            args.extend(flags.iter().map(|f| f.replace("{a}", a).replace("{b}", b)));
            args.extend(["--format".to_owned(), "json".to_owned()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(body["data"], cli_json(d, &args), "{params}");
        }

        // Price stats and token metrics.
        let (status, body) = get(&rt, addr, &format!("/api/price_stats?tokens={a},{b}"), None);
        assert_eq!(status, 200, "{body}");
        let tokens_flag = format!("{a},{b}");
        assert_eq!(
            body["data"],
            cli_json(
                d,
                &["price-stats", "--tokens", &tokens_flag, "--format", "json"]
            )
        );
        let (status, body) = get(
            &rt,
            addr,
            &format!("/api/token_metrics?token={a}&window=1h,1d"),
            None,
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["data"],
            cli_json(
                d,
                &[
                    "token-metrics",
                    "--token",
                    a,
                    "--window",
                    "1h,1d",
                    "--format",
                    "json"
                ]
            )
        );

        // The leaderboard, then a wallet of it: PnL per token, lots, performance.
        let (status, board) = get(&rt, addr, "/api/leaderboard?top=5&method=hifo", None);
        assert_eq!(status, 200, "{board}");
        let expected = lake
            .query()
            .leaderboard_covered(
                5,
                &PnlConfig {
                    method: CostMethod::Hifo,
                    ..PnlConfig::default()
                },
            )
            .expect("leaderboard");
        assert_eq!(
            board["data"],
            Value::Array(json_rows(&expected.value).expect("rows"))
        );
        assert_eq!(
            board["data"],
            cli_json(
                d,
                &["pnl", "--top", "5", "--method", "hifo", "--format", "json"]
            )
        );
        let wallet = board["data"][0]["wallet_address"]
            .as_str()
            .expect("a wallet")
            .to_owned();
        let w = wallet.as_str();
        let cases: [(&str, &[&str]); 3] = [
            ("method=lifo", &["--method", "lifo"]),
            ("lots=true&mark=1.5", &["--lots", "--mark", "1.5"]),
            (
                "performance&period=1h",
                &["--performance", "--period", "1h"],
            ),
        ];
        for (params, flags) in cases {
            let (status, body) = get(&rt, addr, &format!("/api/pnl?wallet={w}&{params}"), None);
            assert_eq!(status, 200, "{params}: {body}");
            let mut args = vec!["pnl", "--wallet", w];
            args.extend(flags);
            args.extend(["--format", "json"]);
            assert_eq!(body["data"], cli_json(d, &args), "{params}");
        }

        // Search: the page's profiles as data, its count and cursor beside them.
        let request = r#"{"options": {"include_market": true}, "limit": 3}"#;
        let file = d.join("request.json");
        std::fs::write(&file, request).expect("request file");
        let page = cli_json(d, &["search", "--request", file.to_str().expect("path")]);
        let body = rt.block_on(async {
            reqwest::Client::new()
                .post(format!("http://{addr}/api/search"))
                .body(request)
                .send()
                .await
                .expect("response")
                .json::<Value>()
                .await
                .expect("JSON")
        });
        assert_eq!(body["data"], page["data"], "{body}");
        assert_eq!(
            (&body["count"], &body["cursor"]),
            (&page["count"], &page["cursor"])
        );
        let encoded: String = url::form_urlencoded::byte_serialize(request.as_bytes()).collect();
        let (status, got) = get(&rt, addr, &format!("/api/search?request={encoded}"), None);
        assert_eq!(status, 200, "{got}");
        assert_eq!(got["data"], page["data"]);

        // Status and check: the CLI's documents.
        let (status, body) = get(&rt, addr, "/api/status", None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"], cli_json(d, &["status", "--format", "json"]));
        assert_eq!(body["version"], body["data"]["version"]);
        let (status, body) = get(&rt, addr, &format!("/api/check?token={a}"), None);
        assert_eq!(status, 200, "{body}");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .args([
                "--lake",
                d.to_str().expect("path"),
                "check",
                "--token",
                a,
                "--format",
                "json",
            ])
            .output()
            .expect("check runs");
        let report: Value = serde_json::from_slice(&out.stdout).expect("the check's JSON");
        assert_eq!(body["data"], report);

        // A bad argument: 400 with the CLI's text. No data: 404 with the CLI's text.
        let (status, body) = get(
            &rt,
            addr,
            &format!("/api/pnl?wallet={w}&method=lifo2"),
            None,
        );
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["status"], 400);
        assert_eq!(
            body["error"],
            cli_error(d, &["pnl", "--wallet", w, "--method", "lifo2"])
        );
        let (status, body) = get(&rt, addr, "/api/bars?token=NoSuchToken&interval=60", None);
        assert_eq!(status, 404, "{body}");
        assert_eq!(
            body["error"],
            cli_error(d, &["ohlcv", "--token", "NoSuchToken", "--interval", "60"])
        );
        for bad in [
            format!("/api/bars?token={a}&interval=60&fill=sideways"),
            format!("/api/bars?token={a}&ticks=5&fill=ffill"),
            format!("/api/bars?token={a}&interval=60&colour=red"),
            format!("/api/bars?token={a}&token={b}&interval=60"),
            "/api/bars?token=%20&interval=60".to_owned(),
            format!("/api/bars?token={a}"),
            format!("/api/pnl?wallet={w}&lots&positions"),
        ] {
            let (status, body) = get(&rt, addr, &bad, None);
            assert_eq!(status, 400, "{bad}: {body}");
            assert!(
                body["error"]
                    .as_str()
                    .expect("text")
                    .starts_with("invalid "),
                "{bad}: {body}"
            );
        }

        // Oversize: refused naming the bound.
        let (status, body) = get(
            &rt,
            addr,
            &format!(
                "/api/bars?token={a}&interval=1&from=2025-01-01T00:00:00Z&to=2026-01-01T00:00:00Z"
            ),
            None,
        );
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"].as_str().expect("text").contains("100000"),
            "{body}"
        );
        let (status, body) = get(&rt, addr, "/api/leaderboard?top=5000", None);
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"].as_str().expect("text").contains("1000"),
            "{body}"
        );

        // No path leaves the API (or the pages, tests/it/serve_pages.rs): each is a JSON 404,
        // whatever file it names.
        for path in [
            "/api/../Cargo.toml",
            "/../../../../etc/passwd",
            "//etc/passwd",
            "/api/bars/../../Cargo.toml",
            "/api/%2e%2e/%2e%2e/Cargo.toml",
            "/Cargo.toml",
            "/api/",
        ] {
            let (status, body) = raw(addr, path, &addr.to_string());
            assert_eq!(status, 404, "{path}: {body}");
            assert!(body.contains("\"status\":404"), "{path}: {body}");
            assert!(
                !body.contains("[package]") && !body.contains("root:"),
                "{path}: {body}"
            );
        }
        // A method a route does not take: a JSON 405.
        let (status, body) = rt.block_on(async {
            let response = reqwest::Client::new()
                .delete(format!("http://{addr}/api/status"))
                .send()
                .await
                .expect("response");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.expect("JSON"))
        });
        assert_eq!((status, &body["status"]), (405, &json!(405)), "{body}");

        // Without a token, only a loopback host is answered.
        let (status, _) = raw(addr, "/api/status", "attacker.example:80");
        assert_eq!(status, 403);
        let (status, _) = raw(addr, "/api/status", &format!("localhost:{}", addr.port()));
        assert_eq!(status, 200);

        // With a token: none or another is 401, the token (header or parameter) is answered.
        let (taddr, _tstop) = start(&rt, d, Access::Token("s3cret".into()));
        let (status, body) = get(&rt, taddr, "/api/status", None);
        assert_eq!((status, &body["status"]), (401, &json!(401)), "{body}");
        assert_eq!(get(&rt, taddr, "/api/status", Some("wrong")).0, 401);
        assert_eq!(get(&rt, taddr, "/api/nowhere", None).0, 401);
        assert_eq!(get(&rt, taddr, "/api/status", Some("s3cret")).0, 200);
        assert_eq!(
            get(&rt, taddr, "/api/status?access_token=s3cret", None).0,
            200
        );
        let (status, body) = get(
            &rt,
            taddr,
            &format!("/api/bars?token={a}&interval=60&access_token=s3cret"),
            None,
        );
        assert_eq!(status, 200, "{body}");

        // A damaged file: 500 naming it.
        let manifest = lake.manifest().expect("manifest");
        let damaged: Vec<String> = manifest
            .files_of(Dataset::Swaps)
            .map(|(p, _)| p.clone())
            .collect();
        for file in &damaged {
            std::fs::write(d.join(file), b"not parquet at all").expect("damage");
        }
        let (status, body) = get(&rt, addr, &format!("/api/bars?token={a}&interval=60"), None);
        assert_eq!(status, 500, "{body}");
        let text = body["error"].as_str().expect("text");
        assert!(damaged.iter().any(|f| text.contains(f.as_str())), "{text}");
    });
}

/// `dexlake serve --token`: the banner's first line names the address; a request without the
/// token is 401, with it 200. Binding beyond loopback without a token, or with an empty one,
/// is refused before anything listens.
#[test]
fn the_command_serves_with_its_token() {
    bounded(120, || {
        let dir = tempfile::tempdir().expect("dir");
        let lake_dir = dir.path().join("lake");
        common::dexlake_cli(&[
            "fixture-lake",
            lake_dir.to_str().expect("path"),
            "--rows",
            "200",
        ]);
        let mut child = Stopped(
            std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
                .arg("--lake")
                .arg(&lake_dir)
                .args(["serve", "--addr", "127.0.0.1:0", "--token", "t0ken"])
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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (status, body) = get(&rt, addr, "/api/status", None);
        let (with, status_body) = get(&rt, addr, "/api/status", Some("t0ken"));
        drop(child);
        assert_eq!(status, 401, "{body}");
        assert_eq!(with, 200, "{status_body}");
        assert!(
            status_body["data"]["datasets"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        );

        let lake = Lake::open_existing(&lake_dir).expect("lake");
        for (addr, access, needle) in [
            ("0.0.0.0:0", Access::Open, "needs an access token"),
            ("127.0.0.1:0", Access::Token(String::new()), "empty"),
        ] {
            let e = rt
                .block_on(Server::bind(
                    addr.parse().expect("addr"),
                    lake.clone(),
                    access,
                ))
                .expect_err("refused");
            assert_eq!(e.kind(), dexlake::ErrorKind::Usage, "{e}");
            assert!(e.to_string().contains(needle), "{e}");
        }
    });
}

/// A child process killed (and waited for) when dropped, a failed assertion included.
pub(crate) struct Stopped(pub(crate) std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
