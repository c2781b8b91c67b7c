"""FIFO realized PnL of every (wallet, token) on the same trades lake: dexlake vs a plain
Python FIFO loop vs polars (Python) vs DuckDB.

Run with `make compare-pnl` (it builds the release binary and the virtualenv first), or
`python benches/compare/pnl.py --dexlake target/release/dexlake [--lake DIR] [--runs 3]`.

The lake is built once (kept between runs) with the hidden `dexlake bench-lake --dataset
trades`, which writes the simulator's `--scale large` market (10M swaps, seen from the wallet's
side: one trade each) through the lake's writer and compacts it. Each engine reads the lake's
Parquet and gives the realized PnL of every (wallet, token):

- dexlake: `dexlake pnl --all-wallets --format parquet --out FILE`, the whole ledgers table
  (FIFO, zero-cost oversells), timed as a whole process.
- Python: a FIFO loop over each ledger's events in event order `(block_time, block_slot, id)`,
  written like dexlake's ledger (a deque of lots, the same tolerance), over the wallets in a
  subset (every wallet whose address sorts in the first `--python-share`). Two parts, timed
  apart: the read, polars collecting every event of the lake sorted by (wallet, token, event
  order), timed on the whole lake, never scaled; and the loop (the subset's sorted events
  turned into Python lists, then the FIFO of each ledger), timed on the subset and
  extrapolated to the whole lake by the count of events (buys and sells). The table gives
  both and their sum, the estimate of a whole-lake Python run. The loop's answer must equal
  dexlake's on those wallets.
- polars and DuckDB: FIFO in closed form. FIFO sells the earliest units bought first, so a
  ledger's matched cost is the cost of the first X units bought, X the quantity sold out of
  the holding: X = Σ buys − the final holding, and the holding is the running balance clamped
  at zero (a sell beyond it is matched against nothing, as dexlake's zero-cost policy does),
  which is S_n − min(0, min_k S_k) for the running sum S of signed quantities. Realized =
  Σ sell proceeds − Σ over buys j of cost_j × clamp((X − B_{j−1}) / q_j, 0, 1), B the running
  sum of bought quantities. Both use window functions (sorted cumulative sums) and a join of
  X back onto the buys. This equals the FIFO loop up to float rounding (and dexlake's 1e-9
  matching tolerance).

Then one wallet, the one with most trades: `dexlake pnl --wallet W --format parquet` (whole
process) against DuckDB's closed form with `where wallet_address = W` on the same files
(`--only-one-wallet` times only this part).

Values: usd_amount when finite and > 0, else token_price × token_amount; quantities are
|token_amount|; zero quantities are no event. The Python peers are timed around the query
inside one process (imports excluded).
"""

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import duckdb
import polars as pl

from harness import dexlake_peak_mib, timed

TOL = 1e-9

DUCKDB_PNL = """
COPY (
  WITH ev AS (
    SELECT wallet_address, token_address, direction = 'buy' AS buy,
           CASE WHEN isfinite(token_amount) THEN abs(token_amount) ELSE 0 END AS q,
           CASE WHEN isfinite(usd_amount) AND usd_amount > 0 THEN usd_amount
                WHEN isfinite(token_price) THEN token_price * token_amount
                ELSE 0 END AS usd,
           block_time, block_slot, id
    FROM read_parquet('{lake}/trades/**/*.parquet', hive_partitioning = true)
    WHERE direction IN ('buy', 'sell'){where}
  ),
  run AS (
    SELECT *,
           sum(CASE WHEN buy THEN q ELSE -q END) OVER w AS s,
           sum(CASE WHEN buy THEN q ELSE 0 END) OVER w AS b
    FROM ev
    WINDOW w AS (PARTITION BY wallet_address, token_address
                 ORDER BY block_time, block_slot, id ROWS UNBOUNDED PRECEDING)
  ),
  ledger AS (
    SELECT wallet_address, token_address,
           sum(CASE WHEN buy THEN 0 ELSE usd END) AS proceeds,
           -- X = Σ buys − final holding; holding = S_n − min(0, min S)
           sum(CASE WHEN buy THEN q ELSE 0 END)
             - (arg_max(s, (block_time, block_slot, id)) - least(0, min(s))) AS x
    FROM run
    GROUP BY ALL
  ),
  cost AS (
    SELECT r.wallet_address, r.token_address,
           sum(CASE WHEN l.x >= r.b THEN r.usd
                    WHEN l.x > r.b - r.q THEN (l.x - (r.b - r.q)) * r.usd / r.q
                    ELSE 0 END) AS matched
    FROM run r JOIN ledger l USING (wallet_address, token_address)
    WHERE r.buy AND r.q > 0
    GROUP BY ALL
  )
  SELECT l.wallet_address, l.token_address,
         l.proceeds - coalesce(c.matched, 0) AS realized_pnl
  FROM ledger l LEFT JOIN cost c USING (wallet_address, token_address)
  ORDER BY wallet_address, token_address
) TO '{out}' (FORMAT parquet)
"""


def events(lf):
    q = pl.col("token_amount")
    return lf.filter(pl.col("direction").is_in(["buy", "sell"])).select(
        "wallet_address",
        "token_address",
        (pl.col("direction") == "buy").alias("buy"),
        pl.when(q.is_finite()).then(q.abs()).otherwise(0.0).alias("q"),
        pl.when(pl.col("usd_amount").is_finite() & (pl.col("usd_amount") > 0))
        .then(pl.col("usd_amount"))
        .when(pl.col("token_price").is_finite())
        .then(pl.col("token_price") * q)
        .otherwise(0.0)
        .alias("usd"),
        "block_time",
        "block_slot",
        "id",
    )


def scan(lake):
    return pl.scan_parquet(f"{lake}/trades/**/*.parquet", hive_partitioning=True)


def polars_pnl(lake, out):
    keys = ["wallet_address", "token_address"]
    ev = (
        events(scan(lake))
        .sort([*keys, "block_time", "block_slot", "id"])
        .with_columns(
            s=pl.when(pl.col("buy")).then(pl.col("q")).otherwise(-pl.col("q")).cum_sum().over(keys),
            b=pl.when(pl.col("buy")).then(pl.col("q")).otherwise(0.0).cum_sum().over(keys),
        )
    )
    ledger = ev.group_by(keys).agg(
        proceeds=pl.col("usd").filter(~pl.col("buy")).sum(),
        x=pl.col("b").last() - (pl.col("s").last() - pl.min_horizontal(0.0, pl.col("s").min())),
    )
    b0 = pl.col("b") - pl.col("q")
    cost = (
        ev.filter(pl.col("buy") & (pl.col("q") > 0))
        .join(ledger.select(*keys, "x"), on=keys)
        .group_by(keys)
        .agg(
            matched=pl.when(pl.col("x") >= pl.col("b"))
            .then(pl.col("usd"))
            .when(pl.col("x") > b0)
            .then((pl.col("x") - b0) * pl.col("usd") / pl.col("q"))
            .otherwise(0.0)
            .sum()
        )
    )
    (
        ledger.join(cost, on=keys, how="left")
        .select(*keys, realized_pnl=pl.col("proceeds") - pl.col("matched").fill_null(0.0))
        .sort(keys)
        .collect()
        .write_parquet(out)
    )


def duckdb_pnl(lake, out, wallet=None):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    where = f" AND wallet_address = '{wallet}'" if wallet else ""
    con.execute(DUCKDB_PNL.format(lake=lake, out=out, where=where))
    con.close()


def fifo_realized(rows):
    """One ledger's realized PnL: rows (buy, q, usd) in event order. dexlake's FIFO ledger
    (zero-cost oversells), operation by operation."""
    lots = collections.deque()
    realized = 0.0
    for buy, q, usd in rows:
        if q <= 0.0:
            continue
        if buy:
            lots.append([q, usd])
            continue
        remaining, matched_cost = q, 0.0
        while remaining > q * TOL and lots:
            lot = lots.popleft()
            whole = remaining >= lot[0] * (1.0 - TOL)
            take = lot[0] if whole else remaining
            cost = lot[1] if whole else lot[1] * take / lot[0]
            if not whole:
                lot[1] -= lot[1] * take / lot[0]
                lot[0] -= take
                lots.appendleft(lot)
            matched_cost += cost
            remaining -= take
        realized += usd - matched_cost
    return realized


def python_events(lake, wallets=None):
    """The events the Python loop reads, sorted by ledger and event order: every event of the
    lake, or those of `wallets`."""
    ev = events(scan(lake))
    if wallets is not None:
        ev = ev.filter(pl.col("wallet_address").is_in(wallets))
    return ev.sort("wallet_address", "token_address", "block_time", "block_slot", "id").collect()


def python_read(lake):
    """The read of a whole-lake Python run: every event sorted; returns the event count."""
    return python_events(lake).height


def python_pnl(df):
    """The FIFO loop over the sorted events of `df`; returns {(wallet, token): realized}."""
    out = {}
    w, t, b, q, u = (df[c].to_list() for c in ("wallet_address", "token_address", "buy", "q", "usd"))
    start = 0
    for i in range(1, len(w) + 1):
        if i == len(w) or w[i] != w[start] or t[i] != t[start]:
            out[(w[start], t[start])] = fifo_realized(zip(b[start:i], q[start:i], u[start:i]))
            start = i
    return out


def dexlake_pnl(binary, lake, out):
    """Runs the CLI under /usr/bin/time -v; returns peak RSS in MiB."""
    return dexlake_peak_mib(binary, [
        "pnl", "--lake", lake, "--all-wallets", "--format", "parquet", "--out", out,
    ])


def dexlake_wallet_pnl(binary, lake, wallet, out):
    """One wallet's ledgers table by the CLI under /usr/bin/time -v; returns peak RSS in MiB."""
    return dexlake_peak_mib(binary, [
        "pnl", "--lake", lake, "--wallet", wallet, "--format", "parquet", "--out", out,
    ])


def one_wallet(a, lake, out):
    """`pnl --wallet W` against DuckDB's filtered closed form, W the wallet with most trades."""
    wallet, n = duckdb.sql(
        f"SELECT wallet_address, count(*) AS n FROM read_parquet('{lake}/trades/**/*.parquet') "
        "GROUP BY ALL ORDER BY n DESC, wallet_address LIMIT 1"
    ).fetchall()[0]
    print(f"one wallet: {wallet} ({n} trades)", flush=True)
    engines = {
        "dexlake `pnl --wallet W --format parquet` (whole process)":
            lambda o: dexlake_wallet_pnl(a.dexlake, lake, wallet, o),
        "DuckDB (closed-form FIFO, `where wallet_address = W`)":
            lambda o: duckdb_pnl(lake, o, wallet),
    }
    times, rss = {}, []
    for run in range(a.runs):
        for name, f in engines.items():
            o = os.path.join(out, f"one-{name.split()[0]}-{run}.parquet")
            dt, extra = timed(f, o)
            times.setdefault(name, []).append(dt)
            if name.startswith("dexlake"):
                rss.append(extra)
            print(f"run {run + 1}: {name}: {dt:.3f} s", flush=True)
    dex = pl.read_parquet(os.path.join(out, "one-dexlake-0.parquet"))
    duck = pl.read_parquet(os.path.join(out, "one-DuckDB-0.parquet"))
    d = {(w, t): r for w, t, r in dex.select("wallet_address", "token_address", "realized_pnl").iter_rows()}
    p = {(w, t): r for w, t, r in duck.iter_rows()}
    assert p.keys() == d.keys(), f"one wallet: other ledgers ({len(p)} vs {len(d)})"
    worst = max((abs(p[k] - d[k]) / max(1.0, abs(d[k])) for k in d), default=0.0)
    print(f"one wallet: DuckDB vs dexlake on {len(d)} ledgers: largest relative difference {worst:.3g}")
    assert worst <= 1e-6, "one wallet: DuckDB and dexlake disagree"
    med = {k: statistics.median(v) for k, v in times.items()}
    dl = next(v for k, v in med.items() if k.startswith("dexlake"))
    print()
    print(f"| one wallet ({n} trades) | median s ({a.runs} runs) | ratio to dexlake |")
    print("|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.3f} | {v / dl:.2f} |")
    print(f"dexlake peak RSS, one wallet: {max(rss):.0f} MiB")
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dexlake", required=True)
    ap.add_argument("--lake", default="target/compare-pnl-lake")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", default="large")
    ap.add_argument("--python-share", type=float, default=0.05)
    ap.add_argument("--only-one-wallet", action="store_true",
                    help="time only `pnl --wallet W` against DuckDB's filtered closed form")
    a = ap.parse_args()
    lake = os.path.abspath(a.lake)
    if not os.path.exists(os.path.join(lake, "trades")):
        os.makedirs(lake, exist_ok=True)
        t = time.perf_counter()
        subprocess.run(
            [a.dexlake, "bench-lake", lake, "--dataset", "trades", "--seed", str(a.seed),
             "--scale", a.scale],
            check=True,
        )
        print(f"built the lake in {time.perf_counter() - t:.1f} s: {lake}")
    rows = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{lake}/trades/**/*.parquet')"
    ).fetchall()[0][0]
    files = sum(1 for _, _, fs in os.walk(os.path.join(lake, "trades")) for f in fs if f.endswith(".parquet"))
    all_wallets = scan(lake).select(pl.col("wallet_address").unique().sort()).collect()["wallet_address"]
    subset = all_wallets.head(max(1, int(len(all_wallets) * a.python_share))).to_list()
    print(f"lake: {rows} trades in {files} files, {len(all_wallets)} wallets; "
          f"the Python loop runs on {len(subset)} wallets", flush=True)

    out = tempfile.mkdtemp(prefix="dexlake-compare-pnl-")
    one_wallet(a, lake, out)
    if a.only_one_wallet:
        shutil.rmtree(out, ignore_errors=True)
        return
    engines = {
        "dexlake `pnl --all-wallets --format parquet` (whole process)": lambda o: dexlake_pnl(a.dexlake, lake, o),
        "polars (closed-form FIFO: sorted cum_sum over (wallet, token), join)": lambda o: polars_pnl(lake, o),
        "DuckDB (closed-form FIFO: window sums, join)": lambda o: duckdb_pnl(lake, o),
    }
    # The Python loop's subset, read untimed: its loop is timed, and the read of the whole
    # lake apart.
    subset_events = python_events(lake, subset)
    py_rows = subset_events.height
    events_total = events(scan(lake)).select(pl.len()).collect().item()
    times, rss, read_times, loop_times = {}, [], [], []
    py = None
    for run in range(a.runs):
        for name, f in engines.items():
            o = os.path.join(out, f"{name.split()[0]}-{run}.parquet")
            dt, extra = timed(f, o)
            times.setdefault(name, []).append(dt)
            if name.startswith("dexlake"):
                rss.append(extra)
            print(f"run {run + 1}: {name}: {dt:.2f} s", flush=True)
        dt, read = timed(python_read, lake)
        assert read == events_total, f"the Python read found {read} events, not {events_total}"
        read_times.append(dt)
        print(f"run {run + 1}: Python read (every event, sorted): {dt:.2f} s", flush=True)
        dt, py = timed(python_pnl, subset_events)
        loop_times.append(dt * events_total / py_rows)
        print(f"run {run + 1}: Python FIFO loop: {dt:.2f} s on {py_rows} events "
              f"({dt * events_total / py_rows:.1f} s extrapolated)", flush=True)

    # The answers must agree before their times mean anything.
    dex = pl.read_parquet(os.path.join(out, "dexlake-0.parquet")).select(
        "wallet_address", "token_address", "realized_pnl", "buy_cost", "sell_proceeds"
    )
    d = {(w, t): r for w, t, r in dex.select("wallet_address", "token_address", "realized_pnl").iter_rows()}
    in_subset = set(subset)
    sub = {k: v for k, v in d.items() if k[0] in in_subset}
    assert sub.keys() == py.keys(), "dexlake and the Python loop have other ledgers"
    exact = sum(1 for k in py if py[k] == sub[k])
    worst = max(abs(py[k] - sub[k]) / max(1.0, abs(py[k])) for k in py)
    print(f"Python FIFO vs dexlake on {len(py)} ledgers: {exact} bit-identical, "
          f"largest relative difference {worst:.3g}")
    assert worst <= 1e-9, "the Python loop and dexlake disagree"
    scale = {k: b + s for k, b, s in zip(
        zip(dex["wallet_address"], dex["token_address"]), dex["buy_cost"], dex["sell_proceeds"])}
    for prefix in ("polars", "DuckDB"):
        peer = pl.read_parquet(os.path.join(out, f"{prefix}-0.parquet"))
        p = {(w, t): r for w, t, r in peer.iter_rows()}
        assert p.keys() == d.keys(), f"{prefix}: other ledgers ({len(p)} vs {len(d)})"
        worst = max(abs(p[k] - d[k]) / max(1.0, scale[k]) for k in d)
        print(f"{prefix} vs dexlake on {len(d)} ledgers: largest difference {worst:.3g} "
              f"of the ledger's traded USD")
        assert worst <= 1e-6, f"{prefix} and dexlake disagree"

    med = {k: statistics.median(v) for k, v in times.items()}
    med["Python: read every event, sorted (polars, whole lake, not scaled)"] = statistics.median(read_times)
    med[f"Python FIFO loop ({py_rows} events of the subset, extrapolated by the event count)"] = (
        statistics.median(loop_times)
    )
    med["Python, read + loop (whole-lake estimate)"] = statistics.median(
        r + l for r, l in zip(read_times, loop_times)
    )
    dl = next(v for k, v in med.items() if k.startswith("dexlake"))
    print()
    print(f"| engine | median s ({a.runs} runs) | trades per second | ratio to dexlake |")
    print("|---|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.2f} | {rows / v / 1e6:.2f} M | {v / dl:.2f} |")
    print()
    print(f"dexlake peak RSS: {max(rss):.0f} MiB")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
