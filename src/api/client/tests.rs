use super::*;

fn addresses(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn chunks_pair_lists_and_keep_order() {
    let tokens = addresses("t", 2500);
    let pools = addresses("p", 1200);
    let calls = price_chunks(&tokens, &pools, 1000, 1000);
    assert_eq!(calls.len(), 3);
    let lens: Vec<(usize, usize)> = calls
        .iter()
        .map(|(t, p)| {
            (
                t.as_ref().map_or(0, Vec::len),
                p.as_ref().map_or(0, Vec::len),
            )
        })
        .collect();
    assert_eq!(lens, vec![(1000, 1000), (1000, 200), (500, 0)]);
    assert!(calls[2].1.is_none());
    let rejoined: Vec<String> = calls.iter().filter_map(|c| c.0.clone()).flatten().collect();
    assert_eq!(rejoined, tokens);
    assert!(price_chunks(&[], &[], 1000, 1000).is_empty());
}

proptest::proptest! {
    #[test]
    fn chunks_respect_bounds_and_rejoin_to_the_input(
        n_tokens in 0usize..2600,
        n_pools in 0usize..2600,
        max_tokens in 1usize..1200,
        max_pools in 1usize..1200,
    ) {
        let tokens = addresses("t", n_tokens);
        let pools = addresses("p", n_pools);
        let calls = price_chunks(&tokens, &pools, max_tokens, max_pools);
        let expected_calls = n_tokens.div_ceil(max_tokens).max(n_pools.div_ceil(max_pools));
        proptest::prop_assert_eq!(calls.len(), expected_calls);
        for (t, p) in &calls {
            // No call is empty or too large, and every member sent has an element.
            proptest::prop_assert!(t.is_some() || p.is_some());
            proptest::prop_assert!(t.as_ref().is_none_or(|t| !t.is_empty() && t.len() <= max_tokens));
            proptest::prop_assert!(p.as_ref().is_none_or(|p| !p.is_empty() && p.len() <= max_pools));
        }
        let t: Vec<String> = calls.iter().filter_map(|c| c.0.clone()).flatten().collect();
        let p: Vec<String> = calls.iter().filter_map(|c| c.1.clone()).flatten().collect();
        proptest::prop_assert_eq!(t, tokens);
        proptest::prop_assert_eq!(p, pools);
    }
}

#[test]
fn credentials_are_redacted_from_urls() {
    assert_eq!(
        redact_url("http://user:pw@host:8080/p?q=a@b"),
        "http://***@host:8080/p?q=a@b"
    );
    assert_eq!(redact_url("https://token@host"), "https://***@host");
    assert_eq!(redact_url("http://a:b@c@host/x"), "http://***@host/x");
    assert_eq!(redact_url("http://host/p@q"), "http://host/p@q");
    assert_eq!(redact_url("not a url"), "not a url");
}

#[test]
fn excerpt_is_short_and_char_safe() {
    let long = "é".repeat(500);
    let e = excerpt(long.as_bytes(), None);
    assert_eq!(e.chars().count(), body::EXCERPT_CHARS + 1);
    assert_eq!(excerpt(b"short", None), "short");
}

#[test]
fn config_from_variables() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| -> Result<Option<String>> {
            Ok(pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned()))
        }
    };
    let missing = ClientConfig::from_lookup(vars(&[(ENV_BASE_URL, "http://x")]));
    assert!(matches!(missing, Err(Error::Config(m)) if m.contains(ENV_API_KEY)));
    let blank = ClientConfig::from_lookup(vars(&[(ENV_API_KEY, "  ")]));
    assert!(matches!(blank, Err(Error::Config(_))));

    let only_key = ClientConfig::from_lookup(vars(&[(ENV_API_KEY, " k1 ")])).expect("key set");
    assert_eq!(only_key.api_key.as_deref(), Some("k1"));
    assert_eq!(only_key.base_url, DEFAULT_BASE_URL);
    assert_eq!(only_key.altchain_segment, DEFAULT_ALTCHAIN_SEGMENT);

    let all = ClientConfig::from_lookup(vars(&[
        (ENV_API_KEY, "k2"),
        (ENV_BASE_URL, "https://example.test/api"),
        (ENV_ALTCHAIN_SEGMENT, "sol"),
    ]))
    .expect("all set");
    assert_eq!(all.base_url, "https://example.test/api");
    assert_eq!(all.altchain_segment, "sol");
}

#[test]
fn debug_never_shows_the_key() {
    let config = ClientConfig::default().with_api_key("secret-value");
    let shown = format!("{config:?}");
    assert!(!shown.contains("secret-value"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let client = Client::new(config).expect("valid configuration");
    assert!(!format!("{client:?}").contains("secret-value"));
}

#[test]
fn config_is_checked() {
    let bad_url = Client::new(ClientConfig::new("not a url"));
    assert!(matches!(bad_url, Err(Error::Config(_))));
    let ftp = Client::new(ClientConfig::new("ftp://example.com"));
    assert!(matches!(ftp, Err(Error::Config(_))));
    let seg = Client::new(ClientConfig::default().with_altchain_segment("a/b"));
    assert!(matches!(seg, Err(Error::Config(_))));
    let key = Client::new(ClientConfig::default().with_api_key("line\nbreak"));
    assert!(matches!(key, Err(Error::Config(_))));
    let client =
        Client::new(ClientConfig::new("http://127.0.0.1:9/prefix/").with_altchain_segment("sol"))
            .expect("valid configuration");
    assert_eq!(
        client.url(Operation::AltGetSwaps),
        "http://127.0.0.1:9/prefix/v1/sol/dex/swaps/get-swaps"
    );
}
