"""Hourly bars of every token from a stored 1-minute EVM price history, on the same lake:
dexlake (`ohlcv --source price-history`) vs polars' `group_by_dynamic` vs DuckDB's
`time_bucket`, and a bare DuckDB scan of the columns the bars need as the floor.

Run with `make compare-series` (it builds the release binary and the virtualenv first), or
`python benches/compare/series.py --dexlake target/release/dexlake [--lake DIR] [--runs 3]
[--tokens 1000] [--days 30] [--interval 3600]`.

The lake is built once (kept between runs) with the hidden `dexlake bench-lake --dataset
price-history`, which writes a point every 60 s for each of `--tokens` EVM tokens of chain 1
over `--days` whole UTC days (43.2 million points at the defaults: seeded random walks, see
`src/bin/dexlake/bench_lake_cmd.rs`) through the lake's writer, in the layout `dexlake sync
price-history` gives (`price_history/chain=evm-1/interval=60/date=…`), and compacts it.
A lake already there must hold that many points (else give another `--lake` or delete it).

Each engine reads the lake's Parquet files (hive partitioning, the partitions of chain 1 at
60 s) and writes one bar per token and bucket of `--interval` seconds to Parquet: open (the
first point's price), high, low, close (the last point's price), volume (the sum of the
points' USD volumes) and count (the number of points), the bars `docs/series.md` defines.
Every engine runs in its own process, under `/usr/bin/time -v` for its peak RSS: dexlake is
timed as a whole process; polars and DuckDB are timed around the query inside their process
(interpreter start and imports excluded; their peak RSS includes the interpreter). The
answers must agree, bar by bar and column by column (prices and counts exactly, volumes to
1e-9 relative), before the times are printed.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DAY = 86_400
SERIES_INTERVAL = 60

DUCKDB_BARS = """
COPY (
  SELECT token_address,
         time_bucket(to_seconds({width}), "timestamp") AS "timestamp",
         arg_min(usd_price, "timestamp") AS open,
         max(usd_price) AS high,
         min(usd_price) AS low,
         arg_max(usd_price, "timestamp") AS close,
         sum(usd_volume) AS volume,
         count(*) AS count
  FROM read_parquet('{lake}/price_history/**/*.parquet', hive_partitioning = true)
  WHERE chain = 'evm-{chain_id}' AND "interval" = {series}
  GROUP BY ALL
  ORDER BY token_address, "timestamp"
) TO '{out}' (FORMAT parquet)
"""

DUCKDB_SCAN = """
SELECT count(*), max(token_address), sum(usd_price), sum(usd_volume), max(epoch_us("timestamp"))
FROM read_parquet('{lake}/price_history/**/*.parquet', hive_partitioning = true)
WHERE chain = 'evm-{chain_id}' AND "interval" = {series}
"""


def duckdb_bars(a):
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    t = time.perf_counter()
    con.execute(DUCKDB_BARS.format(
        lake=a.lake, out=a.out, width=a.interval, chain_id=a.chain_id, series=SERIES_INTERVAL
    ))
    dt = time.perf_counter() - t
    con.close()
    return dt


def duckdb_scan(a):
    import duckdb

    con = duckdb.connect()
    t = time.perf_counter()
    con.execute(DUCKDB_SCAN.format(
        lake=a.lake, chain_id=a.chain_id, series=SERIES_INTERVAL
    )).fetchall()
    dt = time.perf_counter() - t
    con.close()
    return dt


def polars_bars(a):
    import polars as pl

    t = time.perf_counter()
    lf = pl.scan_parquet(f"{a.lake}/price_history/**/*.parquet", hive_partitioning=True)
    bars = (
        lf.filter(
            (pl.col("chain") == f"evm-{a.chain_id}") & (pl.col("interval") == SERIES_INTERVAL)
        )
        .select("token_address", "timestamp", "usd_price", "usd_volume")
        # group_by_dynamic needs the index sorted within each group.
        .sort("token_address", "timestamp")
        .group_by_dynamic(
            "timestamp", every=f"{a.interval}s", group_by="token_address", closed="left",
            label="left",
        )
        .agg(
            open=pl.col("usd_price").first(),
            high=pl.col("usd_price").max(),
            low=pl.col("usd_price").min(),
            close=pl.col("usd_price").last(),
            volume=pl.col("usd_volume").sum(),
            count=pl.len(),
        )
    )
    bars.collect().write_parquet(a.out)
    return time.perf_counter() - t


ENGINES = {"polars": polars_bars, "duckdb": duckdb_bars, "scan": duckdb_scan}


def run_measured(cmd):
    """Runs `cmd` under /usr/bin/time -v (exits on failure): (wall seconds, stdout, peak MiB)."""
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {r.stderr}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return wall, r.stdout, int(m.group(1)) / 1024 if m else float("nan")


def dexlake_bars(a, out):
    wall, _, rss = run_measured([
        a.dexlake, "ohlcv", "--lake", a.lake, "--source", "price-history", "--chain-id",
        str(a.chain_id), "--all-tokens", "--interval", str(a.interval), "--format", "parquet",
        "--out", out,
    ])
    return wall, rss


def peer(a, engine, out):
    """One peer in its own process: the query's own seconds and the process' peak RSS."""
    _, stdout, rss = run_measured([
        sys.executable, os.path.abspath(__file__), "--engine", engine, "--lake", a.lake,
        "--out", out, "--interval", str(a.interval), "--chain-id", str(a.chain_id),
    ])
    return float(stdout.strip().splitlines()[-1]), rss


def point_count(a):
    import duckdb

    path = os.path.join(a.lake, "price_history")
    if not os.path.isdir(path):
        return 0
    return duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{path}/**/*.parquet', hive_partitioning = true) "
        f"WHERE chain = 'evm-{a.chain_id}' AND \"interval\" = {SERIES_INTERVAL}"
    ).fetchall()[0][0]


def build_lake(a):
    expected = a.tokens * a.days * (DAY // SERIES_INTERVAL)
    have = point_count(a)
    if have == 0 and not os.path.exists(os.path.join(a.lake, "price_history")):
        os.makedirs(a.lake, exist_ok=True)
        t = time.perf_counter()
        subprocess.run([
            a.dexlake, "bench-lake", a.lake, "--dataset", "price-history", "--chain-id",
            str(a.chain_id), "--tokens", str(a.tokens), "--days", str(a.days),
            "--series-interval", str(SERIES_INTERVAL), "--seed", str(a.seed),
        ], check=True)
        print(f"built the lake in {time.perf_counter() - t:.1f} s: {a.lake}")
        have = point_count(a)
    if have != expected:
        sys.exit(
            f"the lake {a.lake} holds {have} points, not the {expected} of {a.tokens} tokens "
            f"over {a.days} days: delete it or give another --lake"
        )
    files = sum(
        1 for _, _, fs in os.walk(os.path.join(a.lake, "price_history"))
        for f in fs if f.endswith(".parquet")
    )
    print(f"lake: {have} points of {a.tokens} tokens over {a.days} days in {files} files")


def compare(out):
    """The three answers agree bar by bar; returns (bars, points, USD volume, incomplete)."""
    import polars as pl

    frames = {}
    for name in ("dexlake", "polars", "duckdb"):
        df = pl.read_parquet(os.path.join(out, f"{name}-0.parquet"))
        frames[name] = df.select(
            "token_address",
            pl.col("timestamp").dt.epoch("us").alias("timestamp"),
            "open", "high", "low", "close", "volume",
            pl.col("count").cast(pl.Int64),
        ).sort("token_address", "timestamp")
    ref = frames["dexlake"]
    assert ref.height > 0, "dexlake gave no bars"
    for name in ("polars", "duckdb"):
        df = frames[name]
        assert df.height == ref.height, f"{name}: {df.height} bars, dexlake {ref.height}"
        for c in ("token_address", "timestamp", "open", "high", "low", "close", "count"):
            assert df[c].equals(ref[c]), f"{name}: column {c} differs from dexlake's"
        v = pl.DataFrame({"a": df["volume"], "b": ref["volume"]})
        bad = v.filter(
            (pl.col("a") - pl.col("b")).abs()
            > 1e-9 * pl.max_horizontal(pl.col("a").abs(), pl.col("b").abs())
        ).height
        assert bad == 0, f"{name}: {bad} volumes differ from dexlake's"
    full = pl.read_parquet(os.path.join(out, "dexlake-0.parquet"), columns=["incomplete"])
    return (
        ref.height, int(ref["count"].sum()), float(ref["volume"].sum()),
        int(full["incomplete"].sum()),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dexlake", help="the dexlake binary (every mode but --engine)")
    ap.add_argument("--lake", default="target/compare-series-lake")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--chain-id", type=int, default=1)
    ap.add_argument("--interval", type=int, default=3600, help="bar width, seconds")
    ap.add_argument("--engine", choices=sorted(ENGINES), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.lake = os.path.abspath(a.lake)
    if a.engine:
        # One peer's run in this process: prints its query's seconds.
        print(ENGINES[a.engine](a))
        return
    if not a.dexlake:
        ap.error("--dexlake is required")
    if a.interval <= 0 or a.interval % SERIES_INTERVAL:
        ap.error(f"--interval must be a positive multiple of {SERIES_INTERVAL}")
    build_lake(a)

    out = tempfile.mkdtemp(prefix="dexlake-compare-series-")
    engines = {
        "dexlake (`ohlcv --source price-history`)": ("dexlake", lambda o: dexlake_bars(a, o)),
        "polars (sort, `group_by_dynamic`)": ("polars", lambda o: peer(a, "polars", o)),
        "DuckDB (`time_bucket`, `arg_min`/`arg_max`)": ("duckdb", lambda o: peer(a, "duckdb", o)),
        "DuckDB bare scan of the same 4 columns (floor)": ("scan", lambda o: peer(a, "scan", o)),
    }
    times, rss = {}, {}
    for run in range(a.runs):
        for name, (short, f) in engines.items():
            o = os.path.join(out, f"{short}-{run}.parquet")
            os.sync()
            dt, peak = f(o)
            times.setdefault(name, []).append(dt)
            rss.setdefault(name, []).append(peak)
            print(f"run {run + 1}: {name}: {dt:.2f} s, {peak:.0f} MiB", flush=True)
            # Only the first run's results are compared below.
            if run > 0 and os.path.exists(o):
                os.remove(o)

    bars, points, volume, incomplete = compare(out)
    print(f"every engine: {bars} bars of {points} points, USD volume {volume:.6g}; "
          f"{incomplete} bars flagged incomplete by dexlake")

    med = {k: statistics.median(v) for k, v in times.items()}
    d = med[next(iter(engines))]
    print()
    print(f"{a.tokens} tokens × {a.days} days of 1-minute price history to {a.interval} s bars")
    print()
    print(f"| engine | median s ({a.runs} runs) | ratio to dexlake | peak RSS MiB |")
    print("|---|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.2f} | {v / d:.2f} | {max(rss[k]):.0f} |")
    pol = next(v for k, v in med.items() if k.startswith("polars"))
    floor = next(v for k, v in med.items() if "floor" in k)
    print()
    print(f"speed-up over polars' group_by_dynamic: {pol / d:.2f}x")
    print(f"dexlake / scan floor: {d / floor:.2f}")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
