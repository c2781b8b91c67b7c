//! The report's page: plain HTML and CSS, no script, every value escaped.

use std::fmt::Write as _;

use polars::prelude::*;
use serde_json::Value;

use super::{Report, TokenSection, fmt_time, human, price, short, signed};
use crate::Result;

/// Escapes text for HTML content and attribute values.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body { font-family: -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif; margin: 24px auto;
       max-width: 1000px; color: #282830; padding: 0 16px; }
h1 { margin-bottom: 4px; } h2 { margin-top: 36px; border-bottom: 1px solid #ddd; }
.meta { color: #666; font-size: 14px; }
img { display: block; max-width: 100%; margin: 12px 0; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f6f6f8; } td.text, th.text { text-align: left; }
code, pre { font-family: 'DejaVu Sans Mono', monospace; font-size: 12px; }
pre { background: #f6f6f8; padding: 8px; overflow-x: auto; }
.gain { color: #1e8449; } .loss { color: #c0392b; }
.note { color: #8a6d3b; }
";

fn f64_at(df: &DataFrame, name: &str, i: usize) -> Option<f64> {
    df.column(name).ok()?.f64().ok()?.get(i)
}

fn str_at<'a>(df: &'a DataFrame, name: &str, i: usize) -> Option<&'a str> {
    df.column(name).ok()?.str().ok()?.get(i)
}

fn class_of(v: f64) -> &'static str {
    if v >= 0.0 { "gain" } else { "loss" }
}

fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("<span class=\"{}\">{v:+.2}%</span>", class_of(v)),
        _ => "-".into(),
    }
}

fn money(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("<span class=\"{}\">{}</span>", class_of(v), signed(v)),
        _ => "-".into(),
    }
}

fn at_path<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, k| v.get(k))
}

fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::Number(n)) => n.as_f64().map(human).unwrap_or_else(|| n.to_string()),
        Some(Value::String(s)) => escape(s),
        Some(Value::Array(items)) => escape(
            &items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| i.to_string())
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Some(other) => escape(&other.to_string()),
    }
}

/// The "Data" section: what the lake covers, then the findings of the data-quality check, each
/// kind's count and its first examples.
fn data_section(h: &mut String, r: &Report) {
    h.push_str("<h2>Data</h2>\n");
    // What the syncs fetched of what the report charts, then the check's findings.
    if r.coverage.is_empty() {
        h.push_str(
            "<p>Coverage: the syncs fetched every charted token's events over the period \
             completely (<code>dexlake status</code> lists what the lake covers).</p>\n",
        );
    } else {
        h.push_str(
            "<p>Coverage: parts of the charted tokens' events over the period were never \
             fetched, so their bars may be missing or show only part of the market \
             (<code>dexlake status</code>):</p>\n<ul>\n",
        );
        for w in &r.coverage {
            let _ = writeln!(h, "<li>{}</li>", escape(w));
        }
        h.push_str("</ul>\n");
    }
    let q = &r.quality;
    if q.is_clean() {
        let _ = writeln!(
            h,
            "<p>The data check (<code>dexlake check</code>) found nothing: no gap, price jump, \
             candle differing from the bars of the swaps, repeated id or slot time out of \
             order, over {} swaps of {} tokens.</p>",
            q.swaps, q.tokens
        );
        return;
    }
    let _ = writeln!(
        h,
        "<p>The data check (<code>dexlake check</code>) found {} findings over {} swaps of {} \
         tokens; <code>docs/checks.md</code> says what each means.</p>",
        q.total(),
        q.swaps,
        q.tokens
    );
    h.push_str("<table><tr><th class=\"text\">finding</th><th>count</th><th class=\"text\">examples</th></tr>\n");
    for ((kind, n), (_, examples)) in q.findings.counts().into_iter().zip(q.findings.described()) {
        if n == 0 {
            continue;
        }
        let examples: Vec<String> = examples.iter().map(|e| escape(e)).collect();
        let _ = writeln!(
            h,
            "<tr><td class=\"text\">{kind}</td><td>{n}</td><td class=\"text\">{}</td></tr>",
            examples.join("<br>")
        );
    }
    h.push_str("</table>\n");
}

/// The whole page. `charts` are the file names of [`Report::chart_names`].
/// The table of `tokens` with their 1-hour and 1-day price changes from `stats`; `counted`
/// names what [`TokenSection::events`] counts.
fn tokens_table(
    h: &mut String,
    tokens: &[TokenSection],
    stats: &DataFrame,
    counted: &str,
) -> Result<()> {
    if tokens.is_empty() {
        return Ok(());
    }
    let _ = writeln!(
        h,
        "<table><tr><th>#</th><th class=\"text\">token</th><th class=\"text\">address</th>\
         <th>volume</th><th>{counted}</th><th>last close</th><th>1h</th><th>1d</th></tr>",
    );
    // A section without price stats (none computed) shows its tokens without changes.
    let tokens_col = stats
        .column("token_address")
        .ok()
        .and_then(|c| c.str().ok());
    for (i, t) in tokens.iter().enumerate() {
        let row =
            tokens_col.and_then(|c| c.iter().position(|a| a == Some(t.token_address.as_str())));
        let change = |p: &str| row.and_then(|k| f64_at(stats, &format!("usd_price_change_{p}"), k));
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"text\">{}</td><td class=\"text\"><code title=\"{addr}\">{}</code></td>\
             <td>${}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            escape(&t.label()),
            escape(&short(&t.token_address)),
            human(t.usd_volume),
            t.events,
            t.last_close().map(price).unwrap_or_else(|| "-".into()),
            pct(change("1h")),
            pct(change("1d")),
            addr = escape(&t.token_address),
        );
    }
    h.push_str("</table>\n");
    Ok(())
}

/// One part per EVM chain of the lake's price history: its tokens' table and charts.
fn evm_section(h: &mut String, r: &Report) -> Result<()> {
    if r.evm.is_empty() {
        return Ok(());
    }
    let _ = writeln!(
        h,
        "<h2>EVM chains</h2>\n<p>From the lake's stored price history: each chain's most traded \
         tokens over the last day of its history, ranked by USD volume. Candles are {}-minute \
         bars resampled from the stored points (open and close are the prices at the end of the \
         bar's first and last interval); price changes are computed from the same points.</p>",
        r.evm_bar_seconds / 60
    );
    let mut charts = r.evm_charts();
    for chain in &r.evm {
        let _ = writeln!(
            h,
            "<h3>Chain {}</h3>\n<p class=\"meta\">Period {} to {}</p>",
            chain.chain_id,
            fmt_time(chain.period.from),
            fmt_time(chain.period.to)
        );
        tokens_table(h, &chain.tokens, &chain.price_stats, "points")?;
        for (t, _, name) in charts.by_ref().take(chain.tokens.len()) {
            let _ = writeln!(
                h,
                "<img src=\"charts/{}\" alt=\"candles of {}\" width=\"960\" height=\"480\">",
                escape(&name),
                escape(&t.label())
            );
        }
    }
    Ok(())
}

pub(super) fn page(r: &Report, charts: &[String], lake: &str) -> Result<String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>{STYLE}</style></head><body>\n\
         <h1>{title}</h1>\n<p class=\"meta\">Period {from} to {to} · lake <code>{lake}</code> · \
         computed {generated}</p>\n",
        title = escape(&r.title),
        from = fmt_time(r.period.from),
        to = fmt_time(r.period.to),
        lake = escape(lake),
        generated = r.generated_at.format("%Y-%m-%d %H:%M:%S UTC"),
    );
    for n in &r.notes {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(n));
    }

    // The lake's contents.
    h.push_str("<table><tr><th class=\"text\">dataset</th><th>rows</th></tr>\n");
    for (d, rows) in &r.datasets {
        let _ = writeln!(
            h,
            "<tr><td class=\"text\">{}</td><td>{rows}</td></tr>",
            d.name()
        );
    }
    h.push_str("</table>\n");
    data_section(&mut h, r);

    // Top tokens: a summary table, then one chart each.
    let _ = writeln!(
        h,
        "<h2>Most traded tokens</h2>\n<p>Ranked by USD volume in the period. Candles are \
         {}-minute bars from the lake's events; green volume is buys, red is sells.</p>",
        r.bar_seconds / 60
    );
    tokens_table(&mut h, &r.tokens, &r.price_stats, "events")?;
    for (t, name) in r.tokens.iter().zip(charts) {
        let _ = writeln!(
            h,
            "<img src=\"charts/{}\" alt=\"candles of {}\" width=\"960\" height=\"480\">",
            escape(name),
            escape(&t.label())
        );
    }
    evm_section(&mut h, r)?;

    // The leaderboard.
    h.push_str("<h2>Wallet PnL leaderboard</h2>\n");
    let board = &r.leaderboard;
    if board.height() == 0 {
        h.push_str("<p>No wallet has trades in the lake.</p>\n");
    } else {
        let _ = writeln!(
            h,
            "<p>Every wallet of the lake, FIFO cost basis unless configured otherwise, open \
             positions marked at the lake's latest price.</p>\n\
             <img src=\"charts/leaderboard.png\" alt=\"total PnL of the top wallets\" width=\"960\" height=\"360\">"
        );
        h.push_str(
            "<table><tr><th>#</th><th class=\"text\">wallet</th><th>tokens</th><th>realized</th>\
             <th>unrealized</th><th>total</th><th>ROI</th><th>win rate</th></tr>\n",
        );
        for i in 0..board.height() {
            let wallet = str_at(board, "wallet_address", i).unwrap_or("-");
            let tokens = board
                .column("tokens")
                .ok()
                .and_then(|c| c.get(i).ok())
                .map(|v| v.to_string())
                .unwrap_or_default();
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"text\"><code>{}</code></td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                i + 1,
                escape(wallet),
                escape(&tokens),
                money(f64_at(board, "realized_pnl", i)),
                money(f64_at(board, "unrealized_pnl", i)),
                money(f64_at(board, "total_pnl", i)),
                // Both are percentages already.
                pct(f64_at(board, "roi", i)),
                f64_at(board, "win_rate", i)
                    .filter(|v| v.is_finite())
                    .map(|v| format!("{v:.0}%"))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        h.push_str("</table>\n");
    }

    // The screener.
    h.push_str("<h2>Screener</h2>\n");
    let request = serde_json::to_string_pretty(&r.screener_request).unwrap_or_default();
    match &r.screener {
        None => h.push_str("<p>The lake holds no altchain token profiles.</p>\n"),
        Some(page) => {
            let _ = writeln!(
                h,
                "<p>The search request below, answered from the profile snapshot of {}: \
                 {} tokens match, the first {} are shown.</p>\n<pre>{}</pre>",
                r.snapshot
                    .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                    .unwrap_or_else(|| "-".into()),
                page.count,
                page.data.len(),
                escape(&request)
            );
            let columns = [
                ("symbol", "metadata.symbol"),
                ("name", "metadata.name"),
                ("price", "market.price"),
                ("liquidity", "market.liquidity"),
                ("1h volume", "metrics.1h.volume"),
                ("1d volume", "metrics.1d.volume"),
                ("1h trades", "metrics.1h.trade_count"),
                ("labels", "labels"),
            ];
            h.push_str("<table><tr><th>#</th><th class=\"text\">token</th>");
            for (head, _) in &columns {
                let _ = write!(h, "<th class=\"text\">{head}</th>");
            }
            h.push_str("</tr>\n");
            for (i, doc) in page.data.iter().enumerate() {
                let token = doc
                    .get("token_address")
                    .and_then(Value::as_str)
                    .unwrap_or("-");
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td class=\"text\"><code title=\"{}\">{}</code></td>",
                    i + 1,
                    escape(token),
                    escape(&short(token))
                );
                for (_, path) in &columns {
                    let v = at_path(doc, path);
                    let text = match (path, v) {
                        (&"market.price", Some(Value::Number(n))) => {
                            n.as_f64().map(price).unwrap_or_default()
                        }
                        _ => cell(v),
                    };
                    let _ = write!(h, "<td class=\"text\">{text}</td>");
                }
                h.push_str("</tr>\n");
            }
            h.push_str("</table>\n");
        }
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn documents_are_read_by_path() {
        let doc = serde_json::json!({"market": {"liquidity": 12500.0}, "labels": ["hot", "new"]});
        assert_eq!(cell(at_path(&doc, "market.liquidity")), "12.50k");
        assert_eq!(cell(at_path(&doc, "labels")), "hot, new");
        assert_eq!(cell(at_path(&doc, "metrics.1h.volume")), "-");
    }
}
