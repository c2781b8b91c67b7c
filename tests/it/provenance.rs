//! Where an answer of the CLI stands: `note: lake version N` on stderr before its warnings,
//! and a Parquet output's key-value metadata (the lake version, the command and its arguments
//! without the API key, the coverage and the warnings), read back from the file's footer, on
//! a lake synced from the simulator.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use dexlake::lake::Lake;
use dexlake::sync::{Job, SyncConfig, Syncer};
use parquet::file::reader::{FileReader, SerializedFileReader};
use polars::prelude::{ParquetReader, SerReader};
use serde_json::{Value, json};

use crate::common::{sim_client, tiny_sim};

/// The API key the commands are given, which no output may hold.
const KEY: &str = "SECRET-KEY-1234";

/// Runs `dexlake args`: (exit status, stdout, stderr).
fn dexlake(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .output()
        .expect("the dexlake binary runs");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    )
}

/// The key-value metadata of a Parquet file's footer, read with the `parquet` crate.
fn footer(path: &Path) -> BTreeMap<String, String> {
    let reader = SerializedFileReader::new(File::open(path).expect("the output exists"))
        .expect("a Parquet file");
    reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .expect("key-value metadata")
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect()
}

/// A metadata value parsed as JSON.
fn json_of(meta: &BTreeMap<String, String>, key: &str) -> Value {
    let text = meta
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {meta:?}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{key}: {e}: {text}"))
}

/// The lines stderr must hold for an answer written with `meta`: the version note, then each
/// warning after its prefix.
fn expected_stderr(version: u64, meta: &BTreeMap<String, String>) -> String {
    let mut out = format!("note: lake version {version}\n");
    for w in json_of(meta, "dexlake.warnings")
        .as_array()
        .expect("a list")
    {
        let prefix = match w["kind"].as_str() {
            Some("empty") => "note",
            _ => "warning",
        };
        out.push_str(&format!(
            "{prefix}: {}\n",
            w["text"].as_str().expect("text")
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_name_their_lake_version_and_parquet_outputs_carry_their_provenance() {
    let sim = tiny_sim(11).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Arc::new(Lake::open(dir.path()).expect("lake"));
    let jobs = [
        Job::Swaps {
            token: Some(token.clone()),
            wallet: None,
            pool: None,
        },
        Job::Trades {
            token: Some(token.clone()),
            wallet: None,
        },
    ];
    let report = Syncer::new(sim_client(&sim), Arc::clone(&lake), SyncConfig::default())
        .run(&jobs)
        .await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
    sim.shutdown().await;
    let version = lake.version().expect("the version");
    assert!(version > 0, "the sync committed");
    let root = dir.path().to_str().expect("a UTF-8 path");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let note = format!("note: lake version {version}\n");

    // `status` names the same version, in its JSON and on stderr.
    let (code, status, err) = dexlake(&["--lake", root, "status", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(status["version"], json!(version));
    assert_eq!(err, note);

    // Time bars, streamed to the file a batch of tokens at a time; the key given before the
    // command.
    let bars = out_dir.path().join("bars.parquet");
    let bars_arg = bars.to_str().expect("a UTF-8 path");
    let (code, stdout, err) = dexlake(&[
        "--api-key",
        KEY,
        "--lake",
        root,
        "ohlcv",
        "--token",
        &token,
        "--interval",
        "3600",
        "--format",
        "parquet",
        "--out",
        bars_arg,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    let meta = footer(&bars);
    assert_eq!(meta["dexlake.version"], version.to_string());
    assert_eq!(
        json_of(&meta, "dexlake.query"),
        json!({
            "command": "ohlcv",
            "args": ["--lake", root, "--token", token, "--interval", "3600",
                     "--format", "parquet", "--out", bars_arg],
        })
    );
    let coverage = json_of(&meta, "dexlake.coverage");
    assert_eq!(coverage["dataset"], "swaps", "{coverage}");
    assert_eq!(coverage["targets"][0]["target"], format!("token={token}"));
    assert_eq!(coverage["targets"][0]["recorded"], true, "{coverage}");
    // The token's swaps were synced completely: nothing to warn of.
    assert_eq!(json_of(&meta, "dexlake.warnings"), json!([]));
    assert_eq!(
        meta["dexlake.created_by"],
        format!("dexlake {}", env!("CARGO_PKG_VERSION"))
    );
    assert!(meta.contains_key("ARROW:schema"), "polars' schema is kept");
    assert_eq!(err, note);
    let rows = ParquetReader::new(File::open(&bars).expect("open"))
        .finish()
        .expect("the bars read back");
    assert!(rows.height() > 0);

    // An answer that warns, written at once (tick bars), the key given as `--api-key=K`.
    let tokens = format!("{token},NOPE");
    let ticks = out_dir.path().join("ticks.parquet");
    let key_flag = format!("--api-key={KEY}");
    let (code, _, err) = dexlake(&[
        "--lake",
        root,
        "ohlcv",
        "--tokens",
        &tokens,
        "--ticks",
        "20",
        &key_flag,
        "--format",
        "parquet",
        "--out",
        ticks.to_str().expect("a UTF-8 path"),
    ]);
    assert_eq!(code, 0, "{err}");
    let meta = footer(&ticks);
    assert_eq!(meta["dexlake.version"], version.to_string());
    let query = json_of(&meta, "dexlake.query");
    assert_eq!(query["command"], "ohlcv");
    assert_eq!(query["args"][3], json!(tokens), "{query}");
    assert_eq!(
        query["args"].as_array().expect("a list").len(),
        10,
        "{query}"
    );
    let warnings = json_of(&meta, "dexlake.warnings");
    let kinds: Vec<&str> = warnings
        .as_array()
        .expect("a list")
        .iter()
        .map(|w| w["kind"].as_str().expect("a kind"))
        .collect();
    assert!(kinds.contains(&"no_events"), "{warnings}");
    assert!(kinds.contains(&"coverage"), "{warnings}");
    assert!(
        warnings
            .as_array()
            .expect("a list")
            .iter()
            .all(|w| w["text"].as_str().expect("text").contains("NOPE")),
        "{warnings}"
    );
    // Stderr says the same: the version, then each warning.
    assert_eq!(err, expected_stderr(version, &meta));

    // Every wallet's PnL, streamed a chunk of ledgers at a time.
    let pnl = out_dir.path().join("pnl.parquet");
    let (code, _, err) = dexlake(&[
        "--lake",
        root,
        "pnl",
        "--all-wallets",
        "--format",
        "parquet",
        "--out",
        pnl.to_str().expect("a UTF-8 path"),
    ]);
    assert_eq!(code, 0, "{err}");
    let meta = footer(&pnl);
    assert_eq!(meta["dexlake.version"], version.to_string());
    assert_eq!(json_of(&meta, "dexlake.query")["command"], "pnl");
    assert_eq!(json_of(&meta, "dexlake.coverage")["dataset"], "trades");
    assert_eq!(err, expected_stderr(version, &meta));

    // No output holds the key.
    for file in [&bars, &ticks, &pnl] {
        let bytes = std::fs::read(file).expect("read");
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "{} holds the API key",
            file.display()
        );
    }

    // Other formats and commands print the version on stderr only, once.
    let token = token.as_str();
    for args in [
        vec![
            "ohlcv",
            "--token",
            token,
            "--interval",
            "3600",
            "--format",
            "csv",
        ],
        vec!["price-stats", "--tokens", token],
        vec!["token-metrics", "--token", token, "--window", "1d"],
        vec!["check", "--token", token],
    ] {
        let mut all = vec!["--lake", root];
        all.extend(&args);
        let (code, stdout, err) = dexlake(&all);
        assert!(
            code == 0 || (args[0] == "check" && code == 1),
            "{args:?}: {err}"
        );
        assert!(!stdout.contains("dexlake.version"), "{args:?}");
        assert_eq!(err.matches("lake version").count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(&note), "{args:?}: {err}");
    }
}
