//! Sync against the simulator over loopback: incremental re-runs, faults, and SIGKILL resumes.

use crate::common;
use common::number_texts;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dexlake::ApiStatus;
use dexlake::api::client::{Client, ClientConfig};
use dexlake::lake::{Dataset, Lake};
use dexlake::sim::{Scale, SimConfig, Simulator};
use dexlake::sync::{CancelToken, Job, JobOutcome, SyncConfig, SyncReport, Syncer};
use polars::prelude::*;
use serde_json::Value;

const SEED: u64 = 7;

async fn sim(fail_rate: f64, throttle_rate: f64) -> Simulator {
    Simulator::start(SimConfig {
        seed: SEED,
        scale: Scale::Tiny,
        fail_rate,
        throttle_rate,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts")
}

fn client(sim: &Simulator) -> Client {
    common::sim_client_retrying(sim, 10)
}

/// Addresses from the simulator's catalog: altchain tokens, altchain wallets, chain 1 tokens, now.
fn catalog(sim: &Simulator) -> (Vec<String>, Vec<String>, Vec<String>, DateTime<Utc>) {
    let v = serde_json::to_value(sim.market().catalog()).expect("catalog serialises");
    let addr = |x: &Value| match x {
        Value::String(s) => s.clone(),
        other => ["address", "token_address", "wallet_address", "pool_address"]
            .iter()
            .find_map(|k| other.get(*k).and_then(Value::as_str).map(str::to_owned))
            .expect("catalog entries name an address"),
    };
    let list = |v: &Value| {
        v.as_array()
            .expect("catalog list")
            .iter()
            .map(addr)
            .collect::<Vec<_>>()
    };
    let now = v["now"]
        .as_str()
        .expect("catalog now")
        .parse()
        .expect("RFC 3339 now");
    (
        list(&v["altchain"]["tokens"]),
        list(&v["altchain"]["wallets"]),
        list(&v["evm"]["1"]["tokens"]),
        now,
    )
}

fn jobs(sim: &Simulator) -> Vec<Job> {
    let (tokens, wallets, evm_tokens, now) = catalog(sim);
    let from = now - chrono::Duration::days(2);
    vec![
        Job::Swaps {
            token: Some(tokens[0].clone()),
            wallet: None,
            pool: None,
        },
        Job::Trades {
            token: None,
            wallet: Some(wallets[0].clone()),
        },
        Job::Candles {
            token: Some(tokens[1].clone()),
            pool: None,
            interval: 300,
            from,
            to: Some(now),
        },
        Job::PriceHistory {
            chain_id: 1,
            tokens: evm_tokens[..3].to_vec(),
            pools: vec![],
            interval: 3600,
            from,
            to: Some(now),
        },
        Job::Prices {
            chain_id: None,
            tokens: tokens[..5].to_vec(),
            pools: vec![],
        },
    ]
}

/// Every row of a dataset, sorted by its natural key columns, for exact comparison.
fn rows(lake: &Lake, dataset: Dataset, sort_by: &[&str]) -> DataFrame {
    let cols: Vec<Expr> = sort_by.iter().map(|c| col(*c)).collect();
    lake.scan(dataset)
        .expect("scan")
        .sort_by_exprs(cols, SortMultipleOptions::default())
        .collect()
        .expect("collect")
}

async fn run_sync(sim: &Simulator, lake: &Arc<Lake>, jobs: &[Job]) -> SyncReport {
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        ..SyncConfig::default()
    };
    run_sync_with(sim, lake, jobs, config).await
}

async fn run_sync_with(
    sim: &Simulator,
    lake: &Arc<Lake>,
    jobs: &[Job],
    config: SyncConfig,
) -> SyncReport {
    let sync = Syncer::new(client(sim), Arc::clone(lake), config);
    tokio::time::timeout(Duration::from_secs(120), sync.run(jobs))
        .await
        .expect("sync finishes in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_sync_adds_nothing_and_asks_little() {
    let sim = sim(0.0, 0.0).await;
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let jobs = jobs(&sim);

    let first = run_sync(&sim, &lake, &jobs).await;
    for j in &first.jobs {
        assert_eq!(j.outcome, JobOutcome::Done, "{}", j.job);
        assert!(j.rows_added > 0, "first sync of {} added rows", j.job);
    }
    let served_after_first = sim.requests_served();

    let second = run_sync(&sim, &lake, &jobs).await;
    // Incremental datasets gain nothing; a snapshot (the last job, prices) is a new observation
    // with its own fetch time by design.
    let rows_added: u64 = second.jobs[..4].iter().map(|j| j.rows_added).sum();
    assert_eq!(
        rows_added, 0,
        "a repeated sync adds no rows: {:?}",
        second.jobs
    );
    assert_eq!(
        second.jobs[4].rows_added, first.jobs[4].rows_added,
        "one new snapshot row per token"
    );
    assert_eq!(second.jobs[4].requests, 1);
    let by_job: BTreeMap<String, u64> = second
        .jobs
        .iter()
        .map(|j| (j.job.clone(), j.requests))
        .collect();
    // Swaps and trades: one page shows there is nothing newer. Closed time ranges: nothing.
    // Snapshots are fetched again by nature.
    assert_eq!(second.jobs[0].requests, 1, "{by_job:?}");
    assert_eq!(second.jobs[1].requests, 1, "{by_job:?}");
    assert_eq!(second.jobs[2].requests, 0, "{by_job:?}");
    assert_eq!(second.jobs[3].requests, 0, "{by_job:?}");
    assert_eq!(
        sim.requests_served() - served_after_first,
        second.requests()
    );
    assert!(lake.verify().unwrap().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_do_not_change_the_lake() {
    let clean = sim(0.0, 0.0).await;
    let faulty = sim(0.1, 0.1).await;
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let lake_a = Arc::new(Lake::open(a.path()).unwrap());
    let lake_b = Arc::new(Lake::open(b.path()).unwrap());
    let jobs = jobs(&clean);
    let ra = run_sync(&clean, &lake_a, &jobs).await;
    let rb = run_sync(&faulty, &lake_b, &jobs).await;
    assert!(!ra.any_failed() && !rb.any_failed(), "{:?}", rb.jobs);
    assert!(rb.retries > 0, "the faulty simulator made the client retry");
    assert_eq!(
        rows(&lake_a, Dataset::Swaps, &["id"]),
        rows(&lake_b, Dataset::Swaps, &["id"])
    );
    assert_eq!(
        rows(&lake_a, Dataset::Trades, &["id"]),
        rows(&lake_b, Dataset::Trades, &["id"])
    );
    assert_eq!(
        rows(&lake_a, Dataset::Candles, &["timestamp"]),
        rows(&lake_b, Dataset::Candles, &["timestamp"])
    );
    assert_eq!(
        rows(
            &lake_a,
            Dataset::PriceHistory,
            &["token_address", "timestamp"]
        ),
        rows(
            &lake_b,
            Dataset::PriceHistory,
            &["token_address", "timestamp"]
        )
    );
}

fn write_plan(path: &Path, jobs: &[Job], rps: f64) {
    #[derive(serde::Serialize)]
    struct PlanOut<'a> {
        rps: f64,
        job: &'a [Job],
    }
    std::fs::write(path, toml::to_string(&PlanOut { rps, job: jobs }).unwrap()).unwrap();
}

fn sync_cli(base_url: &str, lake: &Path, plan: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dexlake"));
    cmd.arg("--lake")
        .arg(lake)
        .args([
            "--base-url",
            base_url,
            "--api-key",
            "demo-key",
            "sync",
            "--plan",
        ])
        .arg(plan);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    cmd
}

async fn run_to_end(base_url: &str, lake: &Path, plan: &Path) {
    let mut child = tokio::process::Command::from(sync_cli(base_url, lake, plan))
        .spawn()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .expect("sync in time")
        .unwrap();
    assert!(status.success(), "sync exits 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_resume_gives_the_same_lake_with_fewer_requests() {
    let sim = common::sim_at(SEED, Scale::Small).await;
    let (tokens, wallets, _, _) = catalog(&sim);
    let jobs = vec![
        Job::Swaps {
            token: Some(tokens[0].clone()),
            wallet: None,
            pool: None,
        },
        Job::Trades {
            token: Some(tokens[1].clone()),
            wallet: None,
        },
        Job::Trades {
            token: None,
            wallet: Some(wallets[0].clone()),
        },
    ];
    let work = tempfile::tempdir().unwrap();
    let plan = work.path().join("plan.toml");
    write_plan(&plan, &jobs, 200.0);

    // The reference: one uninterrupted run.
    let reference = work.path().join("reference");
    let before = sim.requests_served();
    run_to_end(sim.base_url(), &reference, &plan).await;
    let full_run = sim.requests_served() - before;
    assert!(
        full_run > 20,
        "the plan is long enough to interrupt ({full_run} requests)"
    );

    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..3 {
        let lake_dir = work.path().join(format!("killed-{round}"));
        let before = sim.requests_served();
        // Two kills at pseudo-random moments, then an undisturbed run to the end.
        for _ in 0..2 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut child =
                tokio::process::Command::from(sync_cli(sim.base_url(), &lake_dir, &plan))
                    .spawn()
                    .unwrap();
            tokio::time::sleep(Duration::from_millis(100 + seed % 900)).await;
            child.start_kill().unwrap(); // SIGKILL
            child.wait().await.unwrap();
        }
        run_to_end(sim.base_url(), &lake_dir, &plan).await;
        let used = sim.requests_served() - before;
        assert!(
            used < 3 * full_run,
            "two kills and a resume used {used} requests; three full runs use {}",
            3 * full_run
        );

        let a = Lake::open(&reference).unwrap();
        let b = Lake::open(&lake_dir).unwrap();
        assert!(b.verify().unwrap().is_ok(), "verify passes after kills");
        assert_eq!(
            rows(&a, Dataset::Swaps, &["id"]),
            rows(&b, Dataset::Swaps, &["id"]),
            "round {round}"
        );
        assert_eq!(
            rows(&a, Dataset::Trades, &["id"]),
            rows(&b, Dataset::Trades, &["id"]),
            "round {round}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_commits_what_was_fetched_and_exits_cleanly() {
    let sim = common::sim_at(SEED, Scale::Small).await;
    let (tokens, _, _, _) = catalog(&sim);
    let jobs = vec![Job::Swaps {
        token: Some(tokens[0].clone()),
        wallet: None,
        pool: None,
    }];
    let work = tempfile::tempdir().unwrap();
    let plan = work.path().join("plan.toml");
    // Slow enough (20 requests per second) that the interrupt lands mid-way.
    write_plan(&plan, &jobs, 20.0);
    let lake_dir = work.path().join("lake");

    let mut cli = sync_cli(sim.base_url(), &lake_dir, &plan);
    cli.stderr(Stdio::piped());
    let mut child = tokio::process::Command::from(cli).spawn().unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, _) = interrupt(&mut child).await;
    assert_eq!(status.code(), Some(130), "interrupted runs exit with 130");
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut err)
        .await
        .unwrap();
    // The job is not claimed done.
    assert!(
        err.contains("interrupted 1/1:") && !err.contains("done 1/1"),
        "{err}"
    );

    let lake = Lake::open(&lake_dir).unwrap();
    assert!(lake.verify().unwrap().is_ok());
    let partial = lake.row_count(Dataset::Swaps).unwrap();
    assert!(partial > 0, "what was fetched before Ctrl-C is committed");
    let state = lake
        .state(&jobs[0].state_key())
        .unwrap()
        .expect("progress recorded");
    assert!(
        state.get("run").is_some_and(|r| !r.is_null()),
        "an interrupted run records where to resume: {state}"
    );

    run_to_end(sim.base_url(), &lake_dir, &plan).await;
    let reference = work.path().join("reference");
    run_to_end(sim.base_url(), &reference, &plan).await;
    let (a, b) = (
        Lake::open(&reference).unwrap(),
        Lake::open(&lake_dir).unwrap(),
    );
    assert!(b.row_count(Dataset::Swaps).unwrap() > partial);
    assert_eq!(
        rows(&a, Dataset::Swaps, &["id"]),
        rows(&b, Dataset::Swaps, &["id"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_candle_ranges_end_at_the_services_now() {
    let sim = sim(0.0, 0.0).await;
    let (tokens, _, _, now) = catalog(&sim);
    let from = now - chrono::Duration::days(3);
    let job = |to| Job::Candles {
        token: Some(tokens[0].clone()),
        pool: None,
        interval: 300,
        from,
        to,
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let open_lake = Arc::new(Lake::open(a.path()).unwrap());
    let closed_lake = Arc::new(Lake::open(b.path()).unwrap());

    // Three days of 5-minute bars fit in one page of 1000, whatever the wall clock says.
    let open = run_sync_with(&sim, &open_lake, &[job(None)], SyncConfig::default()).await;
    assert_eq!(open.jobs[0].outcome, JobOutcome::Done);
    assert_eq!(open.jobs[0].requests, 1, "{:?}", open.jobs);
    assert!(open.jobs[0].rows_added > 0);
    let closed = run_sync(&sim, &closed_lake, &[job(Some(now))]).await;
    assert_eq!(closed.jobs[0].outcome, JobOutcome::Done);
    assert_eq!(
        rows(&open_lake, Dataset::Candles, &["timestamp"]),
        rows(&closed_lake, Dataset::Candles, &["timestamp"]),
        "an open range holds the same bars as the range closed at the service's now"
    );

    // Again: only the recent window is asked for, and it changes nothing.
    let again = run_sync_with(&sim, &open_lake, &[job(None)], SyncConfig::default()).await;
    assert_eq!(again.jobs[0].requests, 1, "{:?}", again.jobs);
    assert_eq!(again.jobs[0].rows_added, 0);
    assert!(
        again.jobs[0].rows_fetched > 0,
        "the recent window is fetched again"
    );
    assert!(again.jobs[0].rows_fetched < open.jobs[0].rows_fetched);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_price_history_stops_at_the_services_now() {
    let sim = sim(0.0, 0.0).await;
    let (_, _, evm_tokens, now) = catalog(&sim);
    let job = Job::PriceHistory {
        chain_id: 1,
        tokens: evm_tokens[..2].to_vec(),
        pools: vec![],
        interval: 3600,
        from: now - chrono::Duration::days(2),
        to: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    // The simulated present lies far before the wall clock; the sync stops at the first empty
    // answer after data instead of walking to the wall clock in 1000-point requests.
    let first = run_sync_with(
        &sim,
        &lake,
        std::slice::from_ref(&job),
        SyncConfig::default(),
    )
    .await;
    assert_eq!(first.jobs[0].outcome, JobOutcome::Done);
    assert!(first.jobs[0].rows_added >= 2 * 48, "{:?}", first.jobs);
    assert!(first.jobs[0].requests <= 3, "{:?}", first.jobs);
    let again = run_sync_with(&sim, &lake, &[job], SyncConfig::default()).await;
    assert_eq!(again.jobs[0].rows_added, 0);
    assert!(again.jobs[0].requests <= 2, "{:?}", again.jobs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_keeps_its_typed_cause() {
    let sim = sim(0.0, 0.0).await;
    let (tokens, _, _, _) = catalog(&sim);
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("not-a-key".into()),
        ..ClientConfig::default()
    })
    .expect("client");
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let sync = Syncer::new(client, lake, SyncConfig::default());
    let job = Job::Swaps {
        token: Some(tokens[0].clone()),
        wallet: None,
        pool: None,
    };
    let report = sync.run(&[job]).await;
    assert!(report.any_failed());
    let error = report.jobs[0].outcome.error().expect("the job failed");
    assert_eq!(error.api_status(), Some(ApiStatus::Unauthorized));
    // The error names the job and keeps the service's answer as its typed cause.
    let dexlake::Error::Sync { job, source } = error else {
        panic!("expected a sync error, got {error:?}");
    };
    assert!(job.starts_with("swaps token="), "{job}");
    match source.as_ref() {
        dexlake::Error::Api {
            status, message, ..
        } => {
            assert_eq!(*status, ApiStatus::Unauthorized);
            assert_eq!(message, "Unauthorized: Invalid or missing API key");
        }
        other => panic!("expected the API error, got {other:?}"),
    }
    assert!(std::error::Error::source(error).is_some());
}

/// Records the restarts a sync reports.
#[derive(Default)]
struct Restarts(std::sync::Mutex<Vec<String>>);

impl dexlake::sync::SyncObserver for Restarts {
    fn on_event(&self, event: dexlake::sync::SyncEvent) {
        if let dexlake::sync::SyncEvent::Restarted { reason, .. } = event {
            self.0.lock().unwrap().push(reason);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profiles_snapshot_whose_cursor_is_refused_starts_again() {
    let sim = sim(0.0, 0.0).await;
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let request: dexlake::api::profile_query::SearchRequest =
        serde_json::from_value(serde_json::json!({"limit": 7})).unwrap();
    let job = Job::AltProfiles { request };
    // An interrupted snapshot whose saved cursor the service no longer accepts.
    let old = DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let mut tx = lake.transaction().unwrap();
    tx.set_state(
        job.state_key(),
        serde_json::json!({"run": {"fetched_at": old, "done": [0], "cursor": "an-expired-cursor"}, "last_fetched_at": null}),
    );
    tx.commit().unwrap();

    let sync = Syncer::new(client(&sim), Arc::clone(&lake), SyncConfig::default());
    let restarts = Restarts::default();
    let report = sync.run_with(&[job], &restarts, &CancelToken::new()).await;
    assert_eq!(
        report.jobs[0].outcome,
        JobOutcome::Done,
        "{:?}",
        report.jobs
    );
    let said = restarts.0.lock().unwrap().clone();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("new fetch time"), "{said:?}");
    // The whole snapshot is in the lake, under one fetch time that is not the old one.
    let profiles = lake
        .scan(Dataset::TokenProfiles)
        .unwrap()
        .collect()
        .unwrap();
    let expected = sim.market().catalog().altchain.tokens.len();
    assert_eq!(profiles.height(), expected);
    let times = profiles.column("fetched_at").unwrap().n_unique().unwrap();
    assert_eq!(times, 1);
    // A later run resumes nothing and takes a fresh snapshot.
    let again = sync
        .run_with(
            std::slice::from_ref(&Job::AltProfiles {
                request: serde_json::from_value(serde_json::json!({"limit": 7})).unwrap(),
            }),
            &restarts,
            &CancelToken::new(),
        )
        .await;
    assert_eq!(again.jobs[0].outcome, JobOutcome::Done);
    assert_eq!(restarts.0.lock().unwrap().len(), 1);
}

/// A candles service that answers every minute bar of the asked range, but at most `cap` bars
/// per answer (the first ones), as a service with an answer-size cap would.
async fn capped_candle_server(cap: usize) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use axum::{Json, Router, routing::post};
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let app = Router::new().route(
        "/v1/altchain/dex/prices/get-price-candles",
        post(move |Json(body): Json<Value>| {
            let seen = Arc::clone(&seen);
            async move {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let at = |m: &str| {
                    DateTime::parse_from_rfc3339(body[m].as_str().unwrap())
                        .unwrap()
                        .timestamp()
                };
                let (from, to) = (at("from"), at("to"));
                let bars: Vec<Value> = (from..=to)
                    .step_by(60)
                    .take(cap)
                    .map(|t| {
                        let time = DateTime::from_timestamp(t, 0).unwrap().to_rfc3339();
                        serde_json::json!({"timestamp": time, "open": 1.0, "high": 1.0,
                            "low": 1.0, "close": 1.0, "volume": 2.0, "count": 1})
                    })
                    .collect();
                Json(Value::Array(bars))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_candle_answer_covers_only_what_it_reaches() {
    let (url, calls) = capped_candle_server(300).await;
    let client = Client::new(ClientConfig {
        base_url: url,
        api_key: Some("k".into()),
        ..ClientConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let from = DateTime::parse_from_rfc3339("2025-05-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let job = Job::Candles {
        token: Some("T".into()),
        pool: None,
        interval: 60,
        from,
        to: Some(from + chrono::Duration::minutes(1000)),
    };
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        ..SyncConfig::default()
    };
    let sync = Syncer::new(client, Arc::clone(&lake), config);
    let first = sync.run(std::slice::from_ref(&job)).await;
    assert_eq!(first.jobs[0].outcome, JobOutcome::Done, "{:?}", first.jobs);
    // 1000 bars in answers of at most 300: four requests, every bar in the lake.
    assert_eq!(first.jobs[0].rows_added, 1000);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 4);
    let again = sync.run(&[job]).await;
    assert_eq!(again.jobs[0].requests, 0, "the whole range is covered now");
}

// ----- Numbers exactly as the service sent them -----

/// A loopback proxy in front of the simulator that keeps the text of every answer body, so a
/// test can compare the lake with the exact JSON the service sent.
struct RecordingProxy {
    url: String,
    bodies: Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn recording_proxy(target: &str) -> RecordingProxy {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode, Uri};
    use axum::response::IntoResponse;

    type Shared = (String, reqwest::Client, Arc<std::sync::Mutex<Vec<String>>>);
    async fn forward(
        State(shared): State<Arc<Shared>>,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> axum::response::Response {
        let (target, http, bodies) = &*shared;
        let mut req = http
            .post(format!("{target}{}", uri.path()))
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = headers.get("x-api-key") {
            req = req.header("x-api-key", key.to_str().expect("an ASCII key"));
        }
        let resp = req.send().await.expect("the simulator answers the proxy");
        let status = StatusCode::from_u16(resp.status().as_u16()).expect("a valid status");
        let text = resp.text().await.expect("the simulator's body is text");
        bodies.lock().expect("bodies lock").push(text.clone());
        (status, [("content-type", "application/json")], text).into_response()
    }

    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let shared = Arc::new((
        target.to_owned(),
        reqwest::Client::new(),
        Arc::clone(&bodies),
    ));
    let app = axum::Router::new().fallback(forward).with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    RecordingProxy {
        url: format!("http://{addr}"),
        bodies,
        task,
    }
}

/// The bits of every float value of a column, inside structs and lists too.
fn float_bits(series: &Series, out: &mut Vec<u64>) {
    match series.dtype() {
        DataType::Float64 => out.extend(
            series
                .f64()
                .expect("a Float64 column")
                .iter()
                .flatten()
                .map(f64::to_bits),
        ),
        DataType::Struct(_) => {
            for field in series
                .struct_()
                .expect("a struct column")
                .fields_as_series()
            {
                float_bits(&field, out);
            }
        }
        DataType::List(_) => {
            float_bits(&series.list().expect("a list column").get_inner(), out);
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_float_reaches_the_lake_bit_for_bit() {
    let sim = sim(0.0, 0.0).await;
    let proxy = recording_proxy(sim.base_url()).await;
    let (tokens, wallets, evm_tokens, _) = catalog(&sim);
    let search = serde_json::from_value(serde_json::json!({
        "options": {
            "include_metadata": true,
            "include_market": true,
            "include_labels": true,
            "include_metrics": ["7d", "1d", "6h", "1h", "5m", "1m"]
        },
        "limit": 100
    }))
    .expect("a search request");
    // Every operation of the service: the plan's swaps, trades, candles and price history (the
    // first four jobs of `jobs`), then every snapshot kind over whole token lists.
    let mut plan: Vec<Job> = jobs(&sim).into_iter().take(4).collect();
    plan.extend([
        Job::Prices {
            chain_id: None,
            tokens: tokens.clone(),
            pools: vec![],
        },
        Job::Prices {
            chain_id: Some(1),
            tokens: evm_tokens.clone(),
            pools: vec![],
        },
        Job::PriceStats {
            chain_id: None,
            tokens: tokens.clone(),
            pools: vec![],
        },
        Job::PriceStats {
            chain_id: Some(1),
            tokens: evm_tokens.clone(),
            pools: vec![],
        },
        Job::EvmProfiles {
            chain_id: 1,
            tokens: evm_tokens.clone(),
        },
        Job::AltProfiles { request: search },
        Job::Portfolios {
            wallets: wallets[..10].to_vec(),
        },
    ]);
    let client = Client::new(ClientConfig::new(&proxy.url).with_api_key("demo-key")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        ..SyncConfig::default()
    };
    let sync = Syncer::new(client, Arc::clone(&lake), config);
    let report = sync.run(&plan).await;
    assert!(!report.any_failed(), "{:?}", report.jobs);

    // Each number as the service wrote it, parsed correctly rounded by the standard library.
    let sent: std::collections::HashSet<u64> = proxy
        .bodies
        .lock()
        .unwrap()
        .iter()
        .flat_map(|b| {
            number_texts(b)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .map(|t| t.parse::<f64>().expect("a JSON number").to_bits())
        .collect();
    // Every dataset the service's answers fill (bars are computed on the lake).
    for dataset in Dataset::ALL.into_iter().filter(|d| !d.is_derived()) {
        let frame = lake.scan(dataset).unwrap().collect().unwrap();
        assert!(frame.height() > 0, "{dataset} holds rows");
        let mut bits = Vec::new();
        for column in frame.columns() {
            float_bits(column.as_materialized_series(), &mut bits);
        }
        assert!(!bits.is_empty(), "{dataset} holds floats");
        let off: Vec<f64> = bits
            .iter()
            .filter(|b| !sent.contains(b))
            .map(|b| f64::from_bits(*b))
            .collect();
        assert!(
            off.is_empty(),
            "{dataset}: {} of {} floats differ from every number the service sent, e.g. {:?}",
            off.len(),
            bits.len(),
            &off[..off.len().min(5)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_numbers_are_clear_errors_not_aborts() {
    let dir = tempfile::tempdir().unwrap();
    // The command line, with --dry-run: a clear error and exit status 2 (usage), no panic or
    // abort.
    for (flags, expected) in [
        (
            vec![
                "candles",
                "--token",
                "T",
                "--interval",
                "9223372036854775807",
                "--from",
                "2025-01-01T00:00:00Z",
                "--dry-run",
            ],
            "interval must be 1 to",
        ),
        (
            vec!["swaps", "--token", "T", "--rps", "1e-20", "--dry-run"],
            "requests per second must be",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
            .arg("--lake")
            .arg(dir.path())
            .args(["--base-url", "http://127.0.0.1:9", "--api-key", "k", "sync"])
            .args(&flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(expected), "{flags:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // A lock timeout that is not a number of seconds from 0 to a week is a usage error.
    for (command, value) in [("sync", "nan"), ("sync", "-1"), ("compact", "1e300")] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dexlake"));
        cmd.arg("--lake").arg(dir.path()).arg(command);
        if command == "sync" {
            cmd.args(["swaps", "--token", "T", "--dry-run"]);
        }
        let out = cmd.arg(format!("--lock-timeout={value}")).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command} {value}: {stderr}");
        assert!(
            stderr.contains("--lock-timeout") && stderr.contains("seconds"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }

    // The library's own planner refuses the same job before planning anything.
    let sim = sim(0.0, 0.0).await;
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let sync = Syncer::new(client(&sim), Arc::clone(&lake), SyncConfig::default());
    let from = "2025-01-01T00:00:00Z".parse().unwrap();
    for interval in [i64::MAX, 0, -1] {
        let job = Job::Candles {
            token: Some("T".into()),
            pool: None,
            interval,
            from,
            to: None,
        };
        let err = sync.estimate(&job).expect_err("refused");
        assert!(err.to_string().contains("interval must be"), "{err}");
        let report = sync.run(&[job]).await;
        assert!(report.any_failed());
    }
    assert_eq!(sim.requests_served(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_meeting_a_held_lake_keeps_its_rows_until_the_lock_comes() {
    use dexlake::lake::LakeOptions;
    let sim = sim(0.0, 0.0).await;
    let (tokens, ..) = catalog(&sim);
    let jobs = vec![Job::Swaps {
        token: Some(tokens[0].clone()),
        wallet: None,
        pool: None,
    }];
    let free_dir = tempfile::tempdir().expect("temp dir");
    let free = Arc::new(Lake::open(free_dir.path()).expect("open"));
    let reference = run_sync(&sim, &free, &jobs).await;
    assert_eq!(reference.jobs[0].outcome, JobOutcome::Done);
    assert!(reference.jobs[0].rows_added > 0);

    // Another writer holds the lake three times longer than the lake's own lock timeout.
    let dir = tempfile::tempdir().expect("temp dir");
    let quick = LakeOptions {
        lock_timeout: Duration::from_secs(1),
        ..LakeOptions::default()
    };
    let lake = Arc::new(Lake::open_with(dir.path(), quick.clone()).expect("open"));
    let holder_lake = Lake::open(dir.path()).expect("open");
    let (held, is_held) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let tx = holder_lake.transaction().expect("holder");
        held.send(()).expect("signal");
        std::thread::sleep(Duration::from_secs(3));
        drop(tx);
    });
    is_held.recv().expect("the holder took the lock");
    let started = std::time::Instant::now();
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        lock_timeout: Duration::from_secs(30),
        ..SyncConfig::default()
    };
    let report = run_sync_with(&sim, &lake, &jobs, config).await;
    holder.join().expect("holder thread");
    let job = &report.jobs[0];
    assert_eq!(job.outcome, JobOutcome::Done, "{:?}", job.outcome.error());
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the sync waited for the holder"
    );
    assert_eq!(
        job.requests, reference.jobs[0].requests,
        "nothing fetched twice"
    );
    assert_eq!(job.rows_added, reference.jobs[0].rows_added);
    let order = ["block_time", "id"];
    assert!(
        rows(&lake, Dataset::Swaps, &order).equals_missing(&rows(&free, Dataset::Swaps, &order)),
        "every fetched row is committed"
    );

    // Cancelled while it waits, a sync stops within the lake's own lock timeout (1 s here),
    // not its long commit wait.
    let cancelled_dir = tempfile::tempdir().expect("temp dir");
    let cancelled = Arc::new(Lake::open_with(cancelled_dir.path(), quick).expect("open"));
    let held = cancelled.transaction().expect("holder");
    let syncer = Syncer::new(
        client(&sim),
        Arc::clone(&cancelled),
        SyncConfig {
            recent_window: Duration::ZERO,
            lock_timeout: Duration::from_secs(60),
            ..SyncConfig::default()
        },
    );
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cancel.cancel();
        })
    };
    let started = std::time::Instant::now();
    let report = tokio::time::timeout(
        Duration::from_secs(30),
        syncer.run_with(&jobs, &(), &cancel),
    )
    .await
    .expect("a cancelled sync does not wait for the lock's whole timeout");
    canceller.await.expect("canceller");
    drop(held);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_ne!(report.jobs[0].outcome, JobOutcome::Done);

    // A commit that waits longer than its lock timeout fails clearly.
    let tx = free.transaction().expect("holder");
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        lock_timeout: Duration::from_millis(300),
        ..SyncConfig::default()
    };
    let report = run_sync_with(&sim, &free, &jobs, config).await;
    drop(tx);
    let err = report.jobs[0].outcome.error().expect("the job fails");
    match err {
        dexlake::Error::Sync { source, .. } => assert!(
            matches!(**source, dexlake::Error::LakeLocked { .. }),
            "{source}"
        ),
        other => panic!("expected a sync error, got {other}"),
    }
}

/// Swaps of every altchain wallet, token and pool of the simulator's catalog: many small jobs
/// whose rows overlap (one swap belongs to a wallet, a token and a pool).
fn many_small_jobs(sim: &Simulator) -> Vec<Job> {
    let v = serde_json::to_value(sim.market().catalog()).expect("catalog serialises");
    let list = |name: &str| -> Vec<String> {
        v["altchain"][name]
            .as_array()
            .expect("catalog list")
            .iter()
            .map(|x| {
                x.get("address")
                    .and_then(Value::as_str)
                    .expect("an address")
                    .to_owned()
            })
            .collect()
    };
    let mut jobs: Vec<Job> = list("wallets")
        .into_iter()
        .map(|w| Job::Swaps {
            token: None,
            wallet: Some(w),
            pool: None,
        })
        .collect();
    jobs.extend(list("tokens").into_iter().map(|t| Job::Swaps {
        token: Some(t),
        wallet: None,
        pool: None,
    }));
    jobs.extend(list("pools").into_iter().map(|p| Job::Swaps {
        token: None,
        wallet: None,
        pool: Some(p),
    }));
    jobs
}

/// Data files per partition folder of a dataset.
fn files_per_partition(lake: &Lake, dataset: Dataset) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (path, _) in lake.manifest().expect("manifest").files_of(dataset) {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        *out.entry(dir).or_insert(0) += 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commits_write_few_files_and_count_rows_per_job() {
    let sim = sim(0.0, 0.0).await;
    let jobs = many_small_jobs(&sim);
    assert!(jobs.len() > 50, "{} jobs", jobs.len());
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    // No compaction: the files are the commits' own.
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        parallel_jobs: 8,
        compact: false,
        ..SyncConfig::default()
    };
    let first = run_sync_with(&sim, &lake, &jobs, config.clone()).await;
    assert!(
        !first.any_failed() && !first.interrupted(),
        "{:?}",
        first.jobs
    );
    let files = files_per_partition(&lake, Dataset::Swaps);
    assert!(!files.is_empty());
    assert!(
        files.values().all(|n| *n <= 2),
        "at most 2 files per partition: {files:?}"
    );
    assert!(first.commits <= 3, "{} commits", first.commits);
    assert_eq!(first.partitions_written, files.len());
    assert!(first.compaction.is_none());
    // Every row is attributed to exactly one job, although the jobs' rows overlap.
    let stored = lake.row_count(Dataset::Swaps).unwrap();
    assert_eq!(first.total_rows_added(), stored);
    let fetched: u64 = first.jobs.iter().map(|j| j.rows_fetched).sum();
    assert!(
        fetched > stored,
        "jobs overlap: {fetched} fetched, {stored} stored"
    );

    let again = run_sync_with(&sim, &lake, &jobs, config).await;
    assert!(!again.any_failed(), "{:?}", again.jobs);
    assert!(
        again.jobs.iter().all(|j| j.rows_added == 0),
        "{:?}",
        again.jobs
    );
    assert_eq!(lake.row_count(Dataset::Swaps).unwrap(), stored);
    assert!(lake.verify().unwrap().is_ok());

    // With the compaction on (the default), many small commits end compacted.
    let small_dir = tempfile::tempdir().unwrap();
    let compacted = Arc::new(Lake::open(small_dir.path()).unwrap());
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        parallel_jobs: 8,
        commit_rows: 300,
        ..SyncConfig::default()
    };
    let report = run_sync_with(&sim, &compacted, &jobs, config).await;
    assert!(!report.any_failed(), "{:?}", report.jobs);
    assert!(report.commits > 3, "{} commits", report.commits);
    let compaction = report.compaction.as_ref().expect("the run compacts");
    let done = compaction.result.as_ref().expect("compaction succeeds");
    assert!(done.files_removed > 0, "{done:?}");
    let files = files_per_partition(&compacted, Dataset::Swaps);
    assert!(files.values().all(|n| *n <= 2), "{files:?}");
    assert_eq!(report.total_rows_added(), stored);
    assert_eq!(
        rows(&lake, Dataset::Swaps, &["id"]),
        rows(&compacted, Dataset::Swaps, &["id"])
    );
}

/// The requests count of the newest "job 0: ... records, N requests" progress line.
fn progress_of(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("job 0: ")?;
    let (records, rest) = rest.split_once(' ')?;
    let requests = rest.split(", ").nth(1)?.strip_suffix(" requests")?;
    Some((records.parse().ok()?, requests.parse().ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_with_many_uncommitted_pages_resumes_without_gaps_or_duplicates() {
    use tokio::io::AsyncBufReadExt;
    let sim = common::sim_at(SEED, Scale::Small).await;
    let (tokens, ..) = catalog(&sim);
    let jobs = vec![Job::Swaps {
        token: Some(tokens[0].clone()),
        wallet: None,
        pool: None,
    }];
    let work = tempfile::tempdir().unwrap();
    let plan = work.path().join("plan.toml");
    write_plan(&plan, &jobs, 100.0);
    let reference = work.path().join("reference");
    run_to_end(sim.base_url(), &reference, &plan).await;
    let total = Lake::open(&reference)
        .unwrap()
        .row_count(Dataset::Swaps)
        .unwrap();
    assert!(
        total > 5_000,
        "the job has more than 50 pages ({total} rows)"
    );

    // Commits every 25 pages; killed once 41 pages are fetched, the buffer holds more than ten
    // pages that no commit has written.
    let lake_dir = work.path().join("killed");
    let mut cmd = sync_cli(sim.base_url(), &lake_dir, &plan);
    cmd.args(["--commit-rows", "2500"]).stderr(Stdio::piped());
    let mut child = tokio::process::Command::from(cmd).spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let fetched = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some((records, requests)) = progress_of(&line)
                && requests >= 41
            {
                return records;
            }
        }
        panic!("the sync ended before 41 requests");
    })
    .await
    .expect("41 requests in time");
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    let committed = Lake::open(&lake_dir)
        .unwrap()
        .row_count(Dataset::Swaps)
        .unwrap();
    assert!(
        fetched >= committed + 1_000,
        "more than ten pages were uncommitted at the kill: {fetched} fetched, {committed} committed"
    );

    run_to_end(sim.base_url(), &lake_dir, &plan).await;
    let (a, b) = (
        Lake::open(&reference).unwrap(),
        Lake::open(&lake_dir).unwrap(),
    );
    assert!(b.verify().unwrap().is_ok());
    assert_eq!(
        rows(&a, Dataset::Swaps, &["id"]),
        rows(&b, Dataset::Swaps, &["id"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_plan_of_2000_jobs_promptly() {
    use tokio::io::AsyncBufReadExt;
    let sim = common::sim_at(SEED, Scale::Small).await;
    let mut jobs = many_small_jobs(&sim);
    let (_, wallets, _, _) = catalog(&sim);
    jobs.extend(wallets.into_iter().map(|w| Job::Trades {
        token: None,
        wallet: Some(w),
    }));
    jobs.truncate(2_000);
    assert_eq!(jobs.len(), 2_000);
    let work = tempfile::tempdir().unwrap();
    let plan = work.path().join("plan.toml");
    write_plan(&plan, &jobs, 2_000.0);
    let lake_dir = work.path().join("lake");

    let mut cmd = sync_cli(sim.base_url(), &lake_dir, &plan);
    cmd.stderr(Stdio::piped());
    let mut child = tokio::process::Command::from(cmd).spawn().unwrap();
    // Interrupted a second after its first job started, amid hundreds of running and
    // finished jobs.
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.starts_with("start: ") {
                return;
            }
        }
        panic!("the sync ended before its first job started");
    })
    .await
    .expect("a job starts in time");
    let drain = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let (status, took) = interrupt(&mut child).await;
    drain.await.unwrap();
    assert_eq!(status.code(), Some(130), "interrupted runs exit with 130");
    // Stopping takes well under two seconds on an idle machine; the bound is generous so that
    // a loaded machine (a build beside the tests) does not fail it, while a run that goes on
    // fetching the 2000 jobs (minutes) still does.
    assert!(
        took < Duration::from_secs(20),
        "exited {took:?} after Ctrl-C"
    );
    let lake = Lake::open(&lake_dir).unwrap();
    assert!(lake.verify().unwrap().is_ok());
    assert!(
        lake.row_count(Dataset::Swaps).unwrap() > 0,
        "the fetched rows were committed"
    );

    run_to_end(sim.base_url(), &lake_dir, &plan).await;
    let reference = work.path().join("reference");
    run_to_end(sim.base_url(), &reference, &plan).await;
    let (a, b) = (
        Lake::open(&reference).unwrap(),
        Lake::open(&lake_dir).unwrap(),
    );
    assert!(b.verify().unwrap().is_ok());
    for dataset in [Dataset::Swaps, Dataset::Trades] {
        assert_eq!(rows(&a, dataset, &["id"]), rows(&b, dataset, &["id"]));
    }
}

/// Sends SIGINT (Ctrl-C) to a running child and waits up to 30 s for it to exit; returns its
/// status and the time it took to exit.
async fn interrupt(child: &mut tokio::process::Child) -> (std::process::ExitStatus, Duration) {
    let pid = child.id().expect("child is running").to_string();
    let sent = std::time::Instant::now();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits after Ctrl-C")
        .unwrap();
    (status, sent.elapsed())
}

// ----- A hostile or odd service -----

/// A client of the service at `url` with the simulator's demo key.
fn client_at(url: &str) -> Client {
    Client::new(ClientConfig {
        base_url: url.to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })
    .expect("a client")
}

/// Runs `jobs` against the service at `url` into `lake`, reporting to `observer`.
async fn sync_at(
    url: &str,
    lake: &Arc<Lake>,
    jobs: &[Job],
    observer: &dyn dexlake::sync::SyncObserver,
) -> SyncReport {
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        ..SyncConfig::default()
    };
    let sync = Syncer::new(client_at(url), Arc::clone(lake), config);
    tokio::time::timeout(
        Duration::from_secs(120),
        sync.run_with(jobs, observer, &CancelToken::new()),
    )
    .await
    .expect("sync finishes in time")
}

/// Keeps the warnings a sync sends.
#[derive(Default)]
struct Warnings(std::sync::Mutex<Vec<String>>);

impl dexlake::sync::SyncObserver for Warnings {
    fn on_event(&self, event: dexlake::sync::SyncEvent) {
        if let dexlake::sync::SyncEvent::Warning { message, .. } = event {
            self.0.lock().unwrap().push(message);
        }
    }
}

fn swaps_of(token: &str) -> Job {
    Job::Swaps {
        token: Some(token.to_owned()),
        wallet: None,
        pool: None,
    }
}

/// The service's `count` of a token's swaps.
async fn swap_count(client: &Client, token: &str) -> i64 {
    client
        .swaps(&dexlake::api::requests::SwapsRequest::for_token(token).limit(1))
        .await
        .expect("a page of swaps")
        .count
}

/// The recorded status of a stream: its rows and the end of its fetched range.
fn stream_status(lake: &Lake, target: &str) -> (Option<u64>, Option<DateTime<Utc>>) {
    let status = dexlake::coverage::status(lake).expect("status");
    let t = status
        .datasets
        .iter()
        .flat_map(|d| &d.targets)
        .find(|t| t.target == target)
        .unwrap_or_else(|| panic!("{target} in {status:?}"));
    (t.rows, t.fetched.last().and_then(|s| s.to))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_a_page_in_any_order_are_all_taken() {
    let sim = common::manual_live_sim(SEED).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let client = common::sim_client(&sim);
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let first = sync_at(sim.base_url(), &lake, &[swaps_of(&token)], &()).await;
    assert_eq!(first.jobs[0].outcome, JobOutcome::Done);
    let before = swap_count(&client, &token).await;
    assert_eq!(lake.row_count(Dataset::Swaps).unwrap(), before as u64);

    // New swaps arrive: fewer than a page, so the newest page holds new and old ones.
    let mut now = before;
    for _ in 0..200 {
        sim.advance(600).unwrap();
        now = swap_count(&client, &token).await;
        if now > before {
            break;
        }
    }
    let new = now - before;
    assert!((1..50).contains(&new), "{new} new swaps");

    // The service sends its newest page oldest first; every new swap is still taken.
    let proxy =
        common::hostile::hostile(sim.base_url(), common::hostile::Mangle::ReverseNewestPage).await;
    let second = sync_at(proxy.url(), &lake, &[swaps_of(&token)], &()).await;
    assert_eq!(second.jobs[0].outcome, JobOutcome::Done);
    assert_eq!(second.jobs[0].rows_added, new as u64, "{:?}", second.jobs);
    assert_eq!(lake.row_count(Dataset::Swaps).unwrap(), now as u64);
    assert_eq!(
        stream_status(&lake, &format!("token={token}")).0,
        Some(now as u64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_dated_far_past_the_answer_are_refused_not_taken_as_the_lakes_end() {
    let sim = common::manual_live_sim(SEED).await;
    let token = sim.market().catalog().altchain.tokens[1].address.clone();
    let service_now = sim.now();
    let proxy = common::hostile::hostile(
        sim.base_url(),
        common::hostile::Mangle::FutureRecords(vec![
            "2099-01-01T00:00:00Z".into(),
            "+262142-01-01T00:00:00Z".into(),
        ]),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let warnings = Warnings::default();
    let report = sync_at(proxy.url(), &lake, &[swaps_of(&token)], &warnings).await;
    assert_eq!(
        report.jobs[0].outcome,
        JobOutcome::Done,
        "{:?}",
        report.jobs
    );
    assert_eq!(report.jobs[0].rows_refused, 2, "{:?}", report.jobs);
    let warnings = warnings.0.lock().unwrap().clone();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("refused 2 records") && w.contains("+262142")),
        "{warnings:?}"
    );
    let expected = swap_count(&common::sim_client(&sim), &token).await;
    assert_eq!(lake.row_count(Dataset::Swaps).unwrap(), expected as u64);
    // Neither the lake's newest record nor the stream's coverage passes the service's time.
    let status = dexlake::coverage::status(&lake).unwrap();
    let swaps = status
        .datasets
        .iter()
        .find(|d| d.dataset == Dataset::Swaps)
        .unwrap();
    assert!(swaps.last.unwrap() <= service_now, "{swaps:?}");
    let (rows, end) = stream_status(&lake, &format!("token={token}"));
    assert_eq!(rows, Some(expected as u64));
    assert!(end.unwrap() <= service_now, "{end:?} after {service_now}");

    // The command line warns and counts them in the job's report.
    let jobs_report = dir.path().join("jobs.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["--lake"])
        .arg(tempfile::tempdir().unwrap().path().join("cli"))
        .args([
            "--base-url",
            proxy.url(),
            "--api-key",
            "demo-key",
            "sync",
            "swaps",
            "--token",
            &token,
            "--jobs-report",
        ])
        .arg(&jobs_report)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning:") && err.contains("refused 2 records"),
        "{err}"
    );
    let jobs: Value = serde_json::from_slice(&std::fs::read(&jobs_report).unwrap()).unwrap();
    assert_eq!(jobs[0]["rows_refused"], 2, "{jobs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_cursors_over_pages_already_seen_end_the_job() {
    let sim = common::tiny_sim(SEED).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let proxy = common::hostile::hostile(
        sim.base_url(),
        common::hostile::Mangle::EndlessRepeats {
            count: 1_000_000_000_000_000,
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        sync_at(proxy.url(), &lake, &[swaps_of(&token)], &()),
    )
    .await
    .expect("the job ends instead of paging forever");
    let error = report.jobs[0].outcome.error().expect("the job fails");
    let message = format!("{error}");
    assert!(
        message.contains("pages in a row") && message.contains("no record not already received"),
        "{message}"
    );
    assert!(proxy.requests() <= 10, "{} requests", proxy.requests());
    // The stream counts each record once, however often the service repeated it.
    let held = lake.row_count(Dataset::Swaps).unwrap();
    assert_eq!(held, 100, "one page of distinct swaps");
    assert_eq!(
        stream_status(&lake, &format!("token={token}")).0,
        Some(held)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_twice_in_one_page_counts_once_in_the_streams_rows() {
    let sim = common::tiny_sim(SEED).await;
    let token = sim.market().catalog().altchain.tokens[2].address.clone();
    let proxy =
        common::hostile::hostile(sim.base_url(), common::hostile::Mangle::DuplicateNewestPage)
            .await;
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let report = sync_at(proxy.url(), &lake, &[swaps_of(&token)], &()).await;
    assert_eq!(
        report.jobs[0].outcome,
        JobOutcome::Done,
        "{:?}",
        report.jobs
    );
    let held = lake.row_count(Dataset::Swaps).unwrap();
    assert_eq!(
        held,
        swap_count(&common::sim_client(&sim), &token).await as u64
    );
    assert_eq!(
        stream_status(&lake, &format!("token={token}")).0,
        Some(held)
    );
}
