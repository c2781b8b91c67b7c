//! Helpers shared by the integration tests. Each test crate uses some of them.
#![allow(dead_code)]

#[cfg(feature = "sim")]
use dexlake::api::client::{Client, ClientConfig};
#[cfg(feature = "sim")]
use dexlake::api::retry::RetryConfig;
#[cfg(feature = "sim")]
use dexlake::sim::{LiveConfig, Scale, SimConfig, Simulator};

/// The simulator of the `tiny` market for `seed`, on loopback.
#[cfg(feature = "sim")]
pub async fn tiny_sim(seed: u64) -> Simulator {
    sim_at(seed, Scale::Tiny).await
}

/// The simulator of the market of `scale` for `seed`, on loopback.
#[cfg(feature = "sim")]
pub async fn sim_at(seed: u64, scale: Scale) -> Simulator {
    Simulator::start(SimConfig {
        seed,
        scale,
        ..SimConfig::default()
    })
    .await
    .expect("the simulator starts")
}

/// A live simulator of the tiny market for `seed` whose clock moves only when the test
/// advances it.
#[cfg(feature = "sim")]
pub async fn manual_live_sim(seed: u64) -> Simulator {
    Simulator::start(SimConfig {
        seed,
        scale: Scale::Tiny,
        live: Some(LiveConfig {
            manual: true,
            ..LiveConfig::default()
        }),
        ..SimConfig::default()
    })
    .await
    .expect("the live simulator starts")
}

/// A client of `sim` with its demo key.
#[cfg(feature = "sim")]
pub fn sim_client(sim: &Simulator) -> Client {
    Client::new(sim_config(sim)).expect("a client of the simulator")
}

/// A client of `sim` that retries up to `max_retries` times with backoffs of milliseconds, for
/// simulators that inject faults.
#[cfg(feature = "sim")]
pub fn sim_client_retrying(sim: &Simulator, max_retries: u32) -> Client {
    let mut config = sim_config(sim);
    config.retry = RetryConfig {
        max_retries,
        initial_backoff: std::time::Duration::from_millis(5),
        max_backoff: std::time::Duration::from_millis(50),
        max_elapsed: std::time::Duration::from_secs(30),
    };
    Client::new(config).expect("a client of the simulator")
}

#[cfg(feature = "sim")]
fn sim_config(sim: &Simulator) -> ClientConfig {
    ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    }
}

/// The text of every number in a JSON document, in document order (strings are skipped).
pub fn number_texts(json: &str) -> Vec<&str> {
    let bytes = json.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                out.push(&json[start..i]);
            }
            _ => i += 1,
        }
    }
    out
}

/// Runs `dexlake args` expecting a refusal: a failure status, no panic, and `needle` in the
/// message on stderr.
pub fn dexlake_cli_refused(args: &[&str], needle: &str) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .output()
        .expect("the dexlake binary runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{args:?} exited 0: {}{err}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
}

/// Runs the `dexlake` binary with `args` and returns its standard output; fails the test,
/// with the command's standard error, on a non-zero exit.
pub fn dexlake_cli(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .output()
        .expect("the dexlake binary runs");
    assert!(
        out.status.success(),
        "dexlake {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[cfg(feature = "sim")]
pub mod hostile;
pub mod lake;
#[cfg(feature = "sim")]
pub mod proxy;
