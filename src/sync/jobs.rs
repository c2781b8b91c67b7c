//! What a sync fetches: one [`Job`] per dataset and target, and plan files of many jobs.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::api::models::ChainFamily;
use crate::api::profile_query::SearchRequest;
use crate::api::retry::{MAX_CONCURRENCY, RateLimit};
use crate::error::{Error, Result};
use crate::lake::Dataset;
use crate::sync::state::StateKey;

/// Largest candle or price-history interval a job accepts, in seconds (366 days).
pub const MAX_INTERVAL_SECONDS: i64 = 366 * 86_400;

/// Largest number of bars (candles or price-history points per target) one job may span, so
/// that a typo in `from` or `interval` cannot plan millions of requests.
pub const MAX_BARS_PER_JOB: i64 = 50_000_000;

/// One unit of fetching: a dataset and what to fetch of it.
///
/// In a plan file each job is a `[[job]]` table whose `dataset` names the variant, for example
/// `dataset = "swaps"` with `token = "..."`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dataset", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Job {
    /// Altchain swaps of a token, wallet or pool (newest first, incremental).
    Swaps {
        /// Token filter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        /// Wallet filter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wallet: Option<String>,
        /// Pool filter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pool: Option<String>,
    },
    /// Altchain trades of a token or wallet (newest first, incremental).
    Trades {
        /// Token filter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        /// Wallet filter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wallet: Option<String>,
    },
    /// Altchain candles of a token or pool over a time range (only missing sub-ranges).
    Candles {
        /// Token address.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        /// Pool address.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pool: Option<String>,
        /// Seconds per candle.
        interval: i64,
        /// Start of the range.
        from: DateTime<Utc>,
        /// End of the range; now when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<DateTime<Utc>>,
    },
    /// EVM price history of tokens or pools over a time range (only missing sub-ranges).
    PriceHistory {
        /// Numeric EVM chain id.
        chain_id: i64,
        /// Token addresses.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tokens: Vec<String>,
        /// Pool addresses.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pools: Vec<String>,
        /// Seconds between points.
        interval: i64,
        /// Start of the range.
        from: DateTime<Utc>,
        /// End of the range; now when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<DateTime<Utc>>,
    },
    /// A snapshot of latest prices (EVM with `chain_id`, altchain without).
    Prices {
        /// EVM chain id; the altchain when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain_id: Option<i64>,
        /// Token addresses.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tokens: Vec<String>,
        /// Pool addresses.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pools: Vec<String>,
    },
    /// A snapshot of price stats (EVM with `chain_id`, altchain without).
    PriceStats {
        /// EVM chain id; the altchain when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain_id: Option<i64>,
        /// Token addresses.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tokens: Vec<String>,
        /// Pool addresses.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pools: Vec<String>,
    },
    /// A snapshot of EVM token profiles: every window and the metadata, one call per token.
    EvmProfiles {
        /// Numeric EVM chain id.
        chain_id: i64,
        /// Token addresses.
        tokens: Vec<String>,
    },
    /// A snapshot of altchain profiles: every page of one search-profiles request.
    AltProfiles {
        /// The search body (its `cursor` is managed by the sync).
        request: SearchRequest,
    },
    /// A snapshot of altchain wallet portfolios.
    Portfolios {
        /// Wallet addresses.
        wallets: Vec<String>,
    },
}

fn chain_part(chain_id: Option<i64>) -> String {
    ChainFamily::from_chain_id(chain_id).to_string()
}

fn filters(pairs: &[(&str, &Option<String>)]) -> String {
    pairs
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(",")
}

/// A short stable digest of a list of strings, so that a state key stays short for long lists.
fn digest(items: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    // FNV-1a: stable across versions and platforms, unlike `DefaultHasher`.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for item in items {
        for b in item.as_ref().bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

impl Job {
    /// The dataset the job writes.
    pub fn dataset(&self) -> Dataset {
        match self {
            Job::Swaps { .. } => Dataset::Swaps,
            Job::Trades { .. } => Dataset::Trades,
            Job::Candles { .. } => Dataset::Candles,
            Job::PriceHistory { .. } => Dataset::PriceHistory,
            Job::Prices { .. } => Dataset::Prices,
            Job::PriceStats { .. } => Dataset::PriceStats,
            Job::EvmProfiles { .. } | Job::AltProfiles { .. } => Dataset::TokenProfiles,
            Job::Portfolios { .. } => Dataset::Portfolios,
        }
    }

    /// What the job fetches, named twice from one look at it: for people (after the dataset in
    /// [`describe`](Self::describe)) and for the manifest (after `sync/<dataset>/` in
    /// [`state_key`](Self::state_key)).
    fn names(&self) -> (String, String) {
        match self {
            Job::Swaps {
                token,
                wallet,
                pool,
            } => {
                let f = filters(&[("token", token), ("wallet", wallet), ("pool", pool)]);
                (f.clone(), f)
            }
            Job::Trades { token, wallet } => {
                let f = filters(&[("token", token), ("wallet", wallet)]);
                (f.clone(), f)
            }
            Job::Candles {
                token,
                pool,
                interval,
                from,
                to,
            } => {
                let f = filters(&[("token", token), ("pool", pool)]);
                let to = to.map_or_else(|| "now".to_owned(), |t| t.to_rfc3339());
                (
                    format!(
                        "{f} interval={interval}s from={} to={to}",
                        from.to_rfc3339()
                    ),
                    format!("{f}/interval={interval}"),
                )
            }
            Job::PriceHistory {
                chain_id,
                tokens,
                pools,
                interval,
                ..
            } => (
                format!(
                    "evm-{chain_id} {} tokens {} pools interval={interval}s",
                    tokens.len(),
                    pools.len()
                ),
                format!("evm-{chain_id}/interval={interval}"),
            ),
            Job::Prices {
                chain_id,
                tokens,
                pools,
            }
            | Job::PriceStats {
                chain_id,
                tokens,
                pools,
            } => {
                let chain = chain_part(*chain_id);
                (
                    format!("{chain} {} tokens {} pools", tokens.len(), pools.len()),
                    format!("{chain}/{}", digest(tokens.iter().chain(pools))),
                )
            }
            Job::EvmProfiles { chain_id, tokens } => (
                format!("evm-{chain_id} {} tokens", tokens.len()),
                format!("evm-{chain_id}/{}", digest(tokens)),
            ),
            Job::AltProfiles { request } => {
                let body = serde_json::to_string(request).unwrap_or_default();
                (
                    "altchain search".to_owned(),
                    format!("altchain/{}", digest([body])),
                )
            }
            Job::Portfolios { wallets } => (
                format!("{} wallets", wallets.len()),
                format!("altchain/{}", digest(wallets)),
            ),
        }
    }

    /// A one-line human description, such as `swaps token=abc`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.dataset(), self.names().0)
    }

    /// The key under which the job's progress is recorded in the lake's manifest. Two jobs
    /// with the same key fetch the same thing.
    pub fn state_key(&self) -> String {
        StateKey::of(self).to_string()
    }

    /// What the job fetches as its state key names it, after `sync/<dataset>/`.
    pub(crate) fn target_name(&self) -> String {
        self.names().1
    }

    /// Checks that the job names what it needs and that its numbers are in range (a positive
    /// chain id, an interval of 1 to [`MAX_INTERVAL_SECONDS`], `from <= to`, at most
    /// [`MAX_BARS_PER_JOB`] bars), before any request is made.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("{}: {msg}", self.dataset())));
        if let Job::Candles {
            interval, from, to, ..
        }
        | Job::PriceHistory {
            interval, from, to, ..
        } = self
            && let Err(msg) = check_range(*interval, *from, *to)
        {
            return bad(msg);
        }
        if let Job::PriceHistory { chain_id, .. }
        | Job::EvmProfiles { chain_id, .. }
        | Job::Prices {
            chain_id: Some(chain_id),
            ..
        }
        | Job::PriceStats {
            chain_id: Some(chain_id),
            ..
        } = self
            && *chain_id <= 0
        {
            return bad(format!(
                "chain_id must be a positive number, got {chain_id}"
            ));
        }
        match self {
            Job::Swaps {
                token: None,
                wallet: None,
                pool: None,
            } => bad("needs a token, wallet or pool".into()),
            Job::Trades {
                token: None,
                wallet: None,
            } => bad("needs a token or wallet".into()),
            Job::Candles {
                token: None,
                pool: None,
                ..
            } => bad("needs a token or pool".into()),
            Job::PriceHistory { tokens, pools, .. }
            | Job::Prices { tokens, pools, .. }
            | Job::PriceStats { tokens, pools, .. }
                if tokens.is_empty() && pools.is_empty() =>
            {
                bad("needs tokens or pools".into())
            }
            Job::EvmProfiles { tokens, .. } if tokens.is_empty() => bad("needs tokens".into()),
            Job::Portfolios { wallets } if wallets.is_empty() => bad("needs wallets".into()),
            Job::AltProfiles { request } => request.validate(),
            _ => Ok(()),
        }
    }
}

/// Checks the interval and time range of a candles or price-history job.
fn check_range(
    interval: i64,
    from: DateTime<Utc>,
    to: Option<DateTime<Utc>>,
) -> std::result::Result<(), String> {
    if !(1..=MAX_INTERVAL_SECONDS).contains(&interval) {
        return Err(format!(
            "interval must be 1 to {MAX_INTERVAL_SECONDS} seconds, got {interval}"
        ));
    }
    let end = to.unwrap_or_else(Utc::now);
    if end < from {
        return Err(format!(
            "from ({}) must not be after to ({})",
            from.to_rfc3339(),
            end.to_rfc3339()
        ));
    }
    // Both ends are valid dates, so the span fits in i64 seconds.
    let bars = (end - from).num_seconds() / interval;
    if bars > MAX_BARS_PER_JOB {
        return Err(format!(
            "from {} to {} at {interval} s is {bars} bars, more than the {MAX_BARS_PER_JOB} one job may span; narrow the range or widen the interval",
            from.to_rfc3339(),
            end.to_rfc3339()
        ));
    }
    Ok(())
}

/// A plan file: many jobs run in one sync, sharing one rate limit and concurrency budget.
///
/// ```toml
/// rps = 10.0          # optional: requests per second for the whole run
/// concurrency = 4     # optional: requests in flight at once
///
/// [[job]]
/// dataset = "swaps"
/// token = "TOKEN_ADDRESS"
///
/// [[job]]
/// dataset = "candles"
/// token = "TOKEN_ADDRESS"
/// interval = 60
/// from = "2026-01-01T00:00:00Z"
///
/// [[job]]
/// dataset = "alt-profiles"
/// request_file = "search.json"   # relative to the plan file
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Requests per second for the whole run.
    pub rps: Option<f64>,
    /// Requests in flight at once.
    pub concurrency: Option<usize>,
    /// The jobs, run in this order (several at once).
    pub jobs: Vec<Job>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    rps: Option<f64>,
    concurrency: Option<usize>,
    #[serde(default)]
    job: Vec<toml::Value>,
}

impl Plan {
    /// Reads a plan file. `request_file` members of `alt-profiles` jobs are read relative to
    /// the plan file's folder.
    pub fn from_file(path: &Path) -> Result<Plan> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("reading plan", path, e))?;
        Self::parse(&text, path.parent().unwrap_or(Path::new(".")))
    }

    /// Parses a plan from TOML text; `base` resolves relative `request_file` paths.
    pub fn parse(text: &str, base: &Path) -> Result<Plan> {
        let file: PlanFile =
            toml::from_str(text).map_err(|e| Error::Config(format!("plan: {e}")))?;
        let mut jobs = Vec::with_capacity(file.job.len());
        for (i, mut value) in file.job.into_iter().enumerate() {
            if let Some(table) = value.as_table_mut()
                && let Some(file) = table.remove("request_file")
            {
                let rel = file.as_str().ok_or_else(|| {
                    Error::Config(format!("plan job {i}: request_file must be a string"))
                })?;
                let request = read_search_request(&base.join(rel))?;
                let json = serde_json::to_value(&request)
                    .map_err(|e| Error::Config(format!("plan job {i}: {e}")))?;
                table.insert("request".into(), json_to_toml(&json));
            }
            let job: Job = value
                .try_into()
                .map_err(|e| Error::Config(format!("plan job {i}: {e}")))?;
            job.validate()?;
            jobs.push(job);
        }
        if jobs.is_empty() {
            return Err(Error::Config("plan: no [[job]] tables".into()));
        }
        if let Some(rps) = file.rps {
            RateLimit::per_second(rps).map_err(|e| Error::Config(format!("plan: rps: {e}")))?;
        }
        if let Some(c) = file.concurrency
            && !(1..=MAX_CONCURRENCY).contains(&c)
        {
            return Err(Error::Config(format!(
                "plan: concurrency must be 1 to {MAX_CONCURRENCY}, got {c}"
            )));
        }
        Ok(Plan {
            rps: file.rps,
            concurrency: file.concurrency,
            jobs,
        })
    }
}

/// Reads a search-profiles body from a JSON file.
pub fn read_search_request(path: &Path) -> Result<SearchRequest> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io("reading search request", path, e))?;
    let request: SearchRequest = serde_json::from_str(&text)
        .map_err(|e| Error::Config(format!("search request {}: {e}", path.display())))?;
    request.validate()?;
    Ok(request)
}

fn json_to_toml(v: &serde_json::Value) -> toml::Value {
    use serde_json::Value as J;
    match v {
        J::Null => toml::Value::String(String::new()),
        J::Bool(b) => toml::Value::Boolean(*b),
        J::Number(n) => n.as_i64().map_or_else(
            || toml::Value::Float(n.as_f64().unwrap_or(0.0)),
            toml::Value::Integer,
        ),
        J::String(s) => toml::Value::String(s.clone()),
        J::Array(a) => toml::Value::Array(a.iter().map(json_to_toml).collect()),
        J::Object(o) => toml::Value::Table(
            o.iter()
                .map(|(k, v)| (k.clone(), json_to_toml(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_plan_with_every_kind_of_job() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("s.json"),
            r#"{"filter": {"market.liquidity": {"$gt": 1000}}, "sort": {"field": "market.liquidity", "direction": "desc"}, "limit": 50}"#,
        )
        .unwrap();
        let plan = Plan::parse(
            r#"
            rps = 5.0
            concurrency = 2
            [[job]]
            dataset = "swaps"
            token = "T1"
            [[job]]
            dataset = "candles"
            pool = "P1"
            interval = 60
            from = "2026-01-01T00:00:00Z"
            [[job]]
            dataset = "price-history"
            chain_id = 1
            tokens = ["A", "B"]
            interval = 3600
            from = "2026-01-01T00:00:00Z"
            to = "2026-01-02T00:00:00Z"
            [[job]]
            dataset = "prices"
            tokens = ["A"]
            [[job]]
            dataset = "alt-profiles"
            request_file = "s.json"
            "#,
            dir.path(),
        )
        .unwrap();
        assert_eq!(plan.rps, Some(5.0));
        assert_eq!(plan.jobs.len(), 5);
        assert_eq!(plan.jobs[0].state_key(), "sync/swaps/token=T1");
        assert_eq!(plan.jobs[1].state_key(), "sync/candles/pool=P1/interval=60");
        match &plan.jobs[4] {
            Job::AltProfiles { request } => assert_eq!(request.limit, Some(50)),
            other => panic!("expected alt-profiles, got {other:?}"),
        }
    }

    #[test]
    fn rejects_jobs_missing_their_target() {
        let err = Plan::parse("[[job]]\ndataset = \"swaps\"\n", Path::new(".")).unwrap_err();
        assert!(
            err.to_string().contains("needs a token, wallet or pool"),
            "{err}"
        );
        assert!(Plan::parse("[[job]]\ndataset = \"nope\"\n", Path::new(".")).is_err());
        assert!(Plan::parse("", Path::new(".")).is_err());
    }

    #[test]
    fn out_of_range_numbers_are_refused() {
        let candles = |interval: &str, from: &str, to: &str| {
            format!(
                "[[job]]\ndataset = \"candles\"\ntoken = \"T\"\ninterval = {interval}\nfrom = \"{from}\"\nto = \"{to}\"\n"
            )
        };
        let day = ("2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z");
        for (text, expected) in [
            (
                candles("9223372036854775807", day.0, day.1),
                "interval must be 1 to",
            ),
            (candles("0", day.0, day.1), "interval must be 1 to"),
            (candles("60", day.1, day.0), "must not be after"),
            (
                candles("1", "0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z"),
                "more than the",
            ),
            (
                format!("rps = 1e-20\n{}", candles("60", day.0, day.1)),
                "requests per second",
            ),
            (
                format!("rps = inf\n{}", candles("60", day.0, day.1)),
                "requests per second",
            ),
            (
                format!("concurrency = 0\n{}", candles("60", day.0, day.1)),
                "concurrency must be",
            ),
            (
                format!(
                    "concurrency = 9223372036854775807\n{}",
                    candles("60", day.0, day.1)
                ),
                "concurrency must be",
            ),
            (
                "[[job]]\ndataset = \"price-stats\"\nchain_id = 0\ntokens = [\"A\"]\n".to_owned(),
                "chain_id must be a positive",
            ),
        ] {
            let err = Plan::parse(&text, Path::new(".")).expect_err("refused");
            assert!(err.to_string().contains(expected), "{text}: {err}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Random numbers in every numeric field of a plan never panic, and a plan that is
        /// accepted plans a bounded number of requests.
        #[test]
        fn random_plans_never_panic(
            interval in proptest::prelude::any::<i64>(),
            small_interval in 1i64..100_000,
            use_small in proptest::prelude::any::<bool>(),
            from in -8_000_000_000_000i64..8_000_000_000_000,
            span in proptest::prelude::any::<i64>(),
            rps in proptest::prelude::any::<f64>(),
            concurrency in proptest::prelude::any::<i64>(),
            chain_id in proptest::prelude::any::<i64>(),
        ) {
            let interval = if use_small { small_interval } else { interval };
            let time = |secs: i64| {
                DateTime::<Utc>::from_timestamp(secs, 0).map(|t| t.to_rfc3339())
            };
            let (Some(from_text), Some(to_text)) = (time(from), time(from.saturating_add(span))) else {
                return Ok(());
            };
            let text = format!(
                "rps = {rps:?}\nconcurrency = {concurrency}\n\
                 [[job]]\ndataset = \"price-history\"\nchain_id = {chain_id}\ntokens = [\"A\"]\n\
                 interval = {interval}\nfrom = \"{from_text}\"\nto = \"{to_text}\"\n"
            );
            if let Ok(plan) = Plan::parse(&text, Path::new(".")) {
                let Job::PriceHistory { interval, from, to: Some(to), .. } = &plan.jobs[0] else {
                    panic!("a closed price-history job");
                };
                let range = crate::sync::ranges::Range::new(from.timestamp(), to.timestamp())
                    .align_out(*interval);
                proptest::prop_assert!(
                    range.chunk_count(*interval) <= (MAX_BARS_PER_JOB + 2) as u64
                );
            }
        }
    }

    #[test]
    fn state_keys_are_stable() {
        let a = Job::Prices {
            chain_id: Some(1),
            tokens: vec!["x".into(), "y".into()],
            pools: vec![],
        };
        let b = Job::Prices {
            chain_id: Some(1),
            tokens: vec!["x".into(), "y".into()],
            pools: vec![],
        };
        let c = Job::Prices {
            chain_id: None,
            tokens: vec!["x".into(), "y".into()],
            pools: vec![],
        };
        assert_eq!(a.state_key(), b.state_key());
        assert_ne!(a.state_key(), c.state_key());
        assert!(a.state_key().starts_with("sync/prices/evm-1/"));
    }
}
