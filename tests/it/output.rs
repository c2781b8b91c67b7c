//! What the CLI prints for people: the table format (bars in a few columns, floats in about
//! six significant digits with thousands separators, text escaped so that service data cannot
//! forge rows), and `warning:` and `note:` lines escaped as `error:` lines are; CSV and JSON
//! keep every column and every bit.

use std::path::Path;
use std::process::Command;

use dexlake::lake::sample::Samples;
use dexlake::lake::{Dataset, Lake, convert};
use serde_json::Value;

/// A wallet address carrying a line break, escape sequences and a bell: printed raw, it would
/// end its row, clear the line and start a forged one.
const FORGER: &str = "W-forger\r\n\u{1b}[2KW-fake  1000000  999\u{1b}]0;title\u{7}";

/// A lake of sample swaps and trades (seed 7): the swaps of token `T0…` priced ten million
/// times lower (bars of prices near 1e-7), and the trades of one wallet given [`FORGER`]'s
/// address.
fn sample_lake() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = Lake::open(dir.path()).expect("lake");
    let mut samples = Samples::generate(7, 400);
    let tiny = samples.swaps[0].token_address_in.clone();
    for s in &mut samples.swaps {
        if s.token_address_in == tiny {
            s.token_price_in *= 1e-7;
        }
        if s.token_address_out == tiny {
            s.token_price_out *= 1e-7;
        }
    }
    let victim = samples.trades[0].wallet_address.clone();
    for t in &mut samples.trades {
        if t.wallet_address == victim {
            t.wallet_address = FORGER.to_owned();
        }
    }
    let mut tx = lake.transaction().expect("transaction");
    tx.write(
        Dataset::Swaps,
        convert::swaps_to_batch(&samples.swaps).expect("swaps"),
    )
    .expect("write swaps");
    tx.write(
        Dataset::Trades,
        convert::trades_to_batch(&samples.trades).expect("trades"),
    )
    .expect("write trades");
    tx.commit().expect("commit");
    (dir, tiny)
}

/// Runs `dexlake --lake LAKE args`: (exit status, stdout, stderr).
fn dexlake(lake: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("--lake")
        .arg(lake)
        .args(args)
        .output()
        .expect("the dexlake binary runs");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    )
}

/// Fails on a control character other than the line feeds that end lines.
fn assert_no_raw_controls(text: &str) {
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "raw control characters in {text:?}"
    );
}

/// A table cell as a number: `1,234.5` is 1234.5, `1.67016e-7` is 1.67016e-7.
fn cell_number(cell: &str) -> f64 {
    cell.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {cell:?}"))
}

/// The significant digits a cell shows (those of its integer part all count).
fn significant_digits(cell: &str) -> usize {
    let mantissa = cell.split('e').next().unwrap_or(cell);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    digits.trim_start_matches('0').len()
}

#[test]
fn the_table_of_bars_is_for_people_and_csv_keeps_every_bit() {
    let (dir, tiny) = sample_lake();
    let bars = ["ohlcv", "--all-tokens", "--interval", "3600"];
    let (code, table, err) = dexlake(dir.path(), &bars);
    assert_eq!(code, 0, "{err}");
    let (code, csv, err) = dexlake(dir.path(), &[&bars[..], &["--format", "csv"]].concat());
    assert_eq!(code, 0, "{err}");

    // CSV: every column, every float in its shortest round-trip form.
    let csv_lines: Vec<&str> = csv.lines().collect();
    let csv_header: Vec<&str> = csv_lines[0].split(',').collect();
    assert_eq!(csv_header.len(), 15, "{csv_header:?}");
    let rows: Vec<Vec<&str>> = csv_lines[1..]
        .iter()
        .map(|l| l.split(',').collect())
        .collect();
    assert!(rows.len() > 20, "{} bars", rows.len());
    let at = |name: &str| csv_header.iter().position(|h| *h == name).unwrap();
    assert!(
        rows.iter().any(|r| r[at("close")].len() > 12),
        "full precision in CSV"
    );

    // The table: the token, time, OHLC, volume and count, under one header.
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "token_address",
            "timestamp",
            "open",
            "high",
            "low",
            "close",
            "volume",
            "count"
        ]
    );
    assert_eq!(lines.len(), rows.len() + 1);
    let mut tiny_prices = 0;
    let mut separated = 0;
    for (line, row) in lines[1..].iter().zip(&rows) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells.len(), 8, "{line}");
        assert_eq!(cells[0], row[at("token_address")]);
        assert_eq!(cells[1], row[at("timestamp")]);
        assert_eq!(cells[7], row[at("count")]);
        for (cell, name) in cells[2..7]
            .iter()
            .zip(["open", "high", "low", "close", "volume"])
        {
            // About six significant digits, the same number to that precision.
            let exact: f64 = row[at(name)].parse().unwrap();
            let shown = cell_number(cell);
            assert!(
                (shown - exact).abs() <= 5e-6 * exact.abs(),
                "{name}: {cell} for {exact}"
            );
            let integer_digits = cell.split('.').next().unwrap().replace(',', "").len();
            assert!(
                significant_digits(cell) <= 6.max(integer_digits),
                "{name}: {cell}"
            );
            separated += usize::from(cell.contains(','));
            if cells[0] == tiny && name != "volume" {
                assert!(cell.contains("e-"), "{name} of the tiny token: {cell}");
                tiny_prices += 1;
            }
        }
        // Numbers are aligned on the right: each line as long as the header's.
        assert_eq!(line.chars().count(), lines[0].chars().count(), "{line}");
    }
    assert!(tiny_prices > 0, "bars of the tiny token");
    assert!(separated > 0, "volumes in thousands have separators");

    // --columns: all of them, some of them in their order, not an unknown one.
    let (code, all, err) = dexlake(dir.path(), &[&bars[..], &["--columns", "all"]].concat());
    assert_eq!(code, 0, "{err}");
    let all_header: Vec<&str> = all.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(all_header, csv_header);
    let picked = [
        &bars[..],
        &["--columns", "vwap,token_address", "--format", "csv"],
    ]
    .concat();
    let (code, some, err) = dexlake(dir.path(), &picked);
    assert_eq!(code, 0, "{err}");
    assert_eq!(some.lines().next(), Some("vwap,token_address"));
    assert_eq!(
        some.lines().nth(1).unwrap().split(',').next(),
        Some(rows[0][at("vwap")])
    );
    let (code, _, err) = dexlake(dir.path(), &[&bars[..], &["--columns", "nope"]].concat());
    assert_ne!(code, 0);
    assert!(
        err.contains("no column \"nope\"") && err.contains("vwap"),
        "{err}"
    );
    let file = dir.path().join("bars.parquet");
    let parquet = [
        &bars[..],
        &["--columns", "open", "--format", "parquet", "--out"],
        &[file.to_str().unwrap()],
    ]
    .concat();
    let (code, _, err) = dexlake(dir.path(), &parquet);
    assert_ne!(code, 0);
    assert!(err.contains("Parquet file keeps every column"), "{err}");
}

#[test]
fn service_data_cannot_forge_rows_or_lines() {
    let (dir, _) = sample_lake();
    // The leaderboard: as many lines as wallets, plus the header; no raw control character.
    let (code, json, err) = dexlake(dir.path(), &["pnl", "--top", "50", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&json).expect("JSON");
    assert!(
        rows.iter().any(|r| r["wallet_address"] == FORGER),
        "JSON keeps the address as it is"
    );
    let (code, table, err) = dexlake(dir.path(), &["pnl", "--top", "50"]);
    assert_eq!(code, 0, "{err}");
    assert_no_raw_controls(&table);
    assert_eq!(table.lines().count(), rows.len() + 1, "{table}");
    assert!(table.contains(r"W-forger\r\n\u{1b}[2KW-fake"), "{table}");
    // The wide format (one `name value` line per column) escapes too.
    let (code, perf, err) = dexlake(dir.path(), &["pnl", "--wallet", FORGER, "--performance"]);
    assert_eq!(code, 0, "{err}");
    assert_no_raw_controls(&perf);

    // A note and a warning naming an address from the arguments.
    let (code, _, err) = dexlake(dir.path(), &["pnl", "--wallet", "W\u{1b}[31mred\u{7}"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("note: no trades")),
        "{err}"
    );
    assert!(
        err.lines()
            .all(|l| l.starts_with("note: ") || l.starts_with("warning: ")),
        "{err}"
    );
    assert_no_raw_controls(&err);
    assert!(err.contains(r"W\u{1b}[31mred\u{7}"), "{err}");
    let tokens = format!("{},T\u{1b}[2J\r\nforged", first_token(dir.path()));
    let (code, _, err) = dexlake(
        dir.path(),
        &["ohlcv", "--tokens", &tokens, "--interval", "3600"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: no swaps for "), "{err}");
    assert_no_raw_controls(&err);
    // The version note, then warnings only (the coverage's too): none forged.
    let mut lines = err.lines();
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("note: lake version ")),
        "{err}"
    );
    assert!(lines.all(|l| l.starts_with("warning: ")), "{err}");
}

/// A token of the sample lake's swaps.
fn first_token(lake: &Path) -> String {
    let (code, csv, err) = dexlake(
        lake,
        &[
            "ohlcv",
            "--all-tokens",
            "--interval",
            "86400",
            "--format",
            "csv",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let line = csv.lines().nth(1).expect("a bar");
    line.split(',').next().unwrap().to_owned()
}

#[test]
fn parquet_without_a_file_is_refused_before_the_lake_is_read() {
    let (dir, token) = sample_lake();
    for args in [
        vec!["pnl", "--all-wallets", "--format", "parquet"],
        vec!["ohlcv", "--all-tokens", "--format", "parquet"],
        vec![
            "token-metrics",
            "--token",
            token.as_str(),
            "--format",
            "parquet",
        ],
    ] {
        let (code, stdout, stderr) = dexlake(dir.path(), &args);
        assert_eq!(code, 2, "{args:?}: a usage error\n{stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(
            stderr.contains("--out"),
            "{args:?}: names the flag\n{stderr}"
        );
        // The refusal comes from the arguments alone: the lake is not opened (opening it
        // prints its version).
        assert!(!stderr.contains("lake version"), "{args:?}: {stderr}");
    }
}

#[test]
fn every_wallet_read_in_parts_writes_the_same_table() {
    use polars::prelude::{ParquetReader, SerReader};
    let (dir, _) = sample_lake();
    let read = |path: &Path| {
        ParquetReader::new(std::fs::File::open(path).expect("open"))
            .finish()
            .expect("read")
    };
    let whole = dir.path().join("whole.parquet");
    let parted = dir.path().join("parted.parquet");
    for (out, extra) in [(&whole, None), (&parted, Some("3"))] {
        let mut args = vec!["pnl", "--all-wallets", "--format", "parquet"];
        args.extend(["--out", out.to_str().expect("path")]);
        if let Some(n) = extra {
            args.extend(["--events-at-once", n]);
        }
        let (code, _, stderr) = dexlake(dir.path(), &args);
        assert_eq!(code, 0, "{stderr}");
    }
    let (a, b) = (read(&whole), read(&parted));
    assert!(a.height() > 10, "{} ledgers", a.height());
    assert!(a.equals_missing(&b), "{a}\n{b}");
    // Without --all-wallets the flag is refused.
    let (code, _, stderr) = dexlake(
        dir.path(),
        &["pnl", "--wallet", "W", "--events-at-once", "3"],
    );
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn every_token_read_in_parts_gives_the_same_bars_stats_and_check() {
    use polars::prelude::{ParquetReader, SerReader};
    let (dir, _) = sample_lake();
    let read = |path: &Path| {
        ParquetReader::new(std::fs::File::open(path).expect("open"))
            .finish()
            .expect("read")
    };
    let whole = dir.path().join("whole.parquet");
    let parted = dir.path().join("parted.parquet");
    for (out, extra) in [(&whole, None), (&parted, Some("5"))] {
        let mut args = vec!["ohlcv", "--all-tokens", "--interval", "60"];
        args.extend(["--format", "parquet", "--out", out.to_str().expect("path")]);
        if let Some(n) = extra {
            args.extend(["--events-at-once", n]);
        }
        let (code, _, stderr) = dexlake(dir.path(), &args);
        assert_eq!(code, 0, "{stderr}");
    }
    let (a, b) = (read(&whole), read(&parted));
    let tokens: Vec<String> = a
        .column("token_address")
        .expect("token column")
        .str()
        .expect("strings")
        .iter()
        .flatten()
        .map(str::to_owned)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(tokens.len() > 3, "{} tokens", tokens.len());
    assert!(a.height() > 10, "{} bars", a.height());
    assert!(a.equals_missing(&b), "{a}\n{b}");
    // The price stats and the check, whole and in parts of about fifty events.
    let list = tokens.join(",");
    let runs = |extra: &[&str]| {
        let mut stats = vec!["price-stats", "--tokens", &list, "--format", "csv"];
        stats.extend(extra);
        let (code, stats, stderr) = dexlake(dir.path(), &stats);
        assert_eq!(code, 0, "{stderr}");
        let mut check = vec!["check", "--format", "json", "--examples", "1000"];
        check.extend(extra);
        let (code, check, stderr) = dexlake(dir.path(), &check);
        assert!(code == 0 || code == 1, "{code}: {stderr}");
        (stats, check)
    };
    let (stats, check) = runs(&[]);
    assert!(stats.lines().count() > tokens.len(), "{stats}");
    assert_eq!(runs(&["--events-at-once", "50"]), (stats, check));
}
