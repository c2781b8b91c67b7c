"""1-minute OHLCV of every token on the same swaps lake: dexlake vs DuckDB vs polars (Python),
and a bare DuckDB scan of the columns the bars need as the floor.

Run with `make compare` (it builds the release binary and the virtualenv first), or
`python benches/compare/ohlcv.py --dexlake target/release/dexlake [--lake DIR] [--runs 3]`.

The lake is built once (kept between runs) with the hidden `dexlake bench-lake`, which writes
the simulator's `--scale large` market (10M swaps) through the lake's writer and compacts it;
`tests/analytics_ohlcv.rs::bench_lake_writes_what_a_sync_writes` shows it gives the rows and
partitions a sync gives. Every engine writes its bars to Parquet, so all of them materialise
the full result, and all of them write it with zstd at the level dexlake's CLI uses
(`ZSTD_LEVEL` below; the script checks that every column chunk of every output is zstd, and
the table says so); other writer settings (row groups, encodings) are each engine's own.
DuckDB reads the swaps once: each swap is joined with the two token sides (bought, sold) and
kept on the sides its `swap_type` has, in one scan of the files (the script checks with
`EXPLAIN` that the plan reads the Parquet files once). dexlake is timed as a whole process
(with `/usr/bin/time -v` for its peak RSS); the Python peers are timed around the query inside
one process (imports excluded).

Before the times are printed, the answers are compared bar by bar on every column the engines
share (all but dexlake's `incomplete`): the same (token_address, timestamp) keys in the same
order, equal `count`, `open`, `high`, `low` and `close` (prices chosen, not computed), and the
sums (`volume`, `base_volume`, `buy_volume`, `sell_volume`, `sum_pq`, `sum_q`) and `vwap` within
a relative 1e-9 (float sums depend on the order of their terms).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import duckdb
import polars as pl
import pyarrow.parquet as pq

from harness import dexlake_peak_mib, timed

# The zstd level of dexlake's Parquet output (`ZSTD_LEVEL` in src/bin/dexlake/output.rs): every
# engine writes its bars with it.
ZSTD_LEVEL = 1

# The token side of a swap: bought side of quote_token, sold side of token_quote, both sides
# of token_token (the simulator writes only the first two). One scan: each swap joined with the
# two sides, kept on those its type has.
DUCKDB_BARS = """
COPY (
  WITH ev AS (
    SELECT CASE WHEN buy THEN token_address_out ELSE token_address_in END AS token,
           CASE WHEN buy THEN token_price_out ELSE token_price_in END AS price,
           CASE WHEN buy THEN token_amount_out ELSE token_amount_in END AS q,
           CASE WHEN buy THEN usd_amount_out ELSE usd_amount_in END AS usd,
           buy, block_time, block_slot, id
    FROM read_parquet('{lake}/swaps/**/*.parquet', hive_partitioning = true)
    CROSS JOIN (VALUES (true), (false)) AS side(buy)
    WHERE CASE WHEN buy THEN swap_type IN ('quote_token', 'token_token')
               ELSE swap_type IN ('token_quote', 'token_token') END
  )
  SELECT token AS token_address,
         time_bucket(INTERVAL 1 minute, block_time) AS timestamp,
         arg_min(price, (block_time, block_slot, id)) AS open,
         max(price) AS high,
         min(price) AS low,
         arg_max(price, (block_time, block_slot, id)) AS close,
         sum(usd) AS volume,
         sum(q) AS base_volume,
         sum(CASE WHEN buy THEN usd ELSE 0 END) AS buy_volume,
         sum(CASE WHEN buy THEN 0 ELSE usd END) AS sell_volume,
         sum(price * q) AS sum_pq,
         sum(q) AS sum_q,
         count(*) AS count,
         sum(price * q) / sum(q) AS vwap
  FROM ev
  GROUP BY ALL
  ORDER BY token_address, timestamp
) TO '{out}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL {level})
"""

SCAN_COLUMNS = [
    "id", "swap_type", "token_address_in", "token_address_out", "token_amount_in",
    "token_amount_out", "token_price_in", "token_price_out", "usd_amount_in", "usd_amount_out",
    "block_slot", "block_time",
]

DUCKDB_SCAN = (
    "SELECT count(*), "
    + ", ".join(
        f"max({c})" if c in ("swap_type", "token_address_in", "token_address_out")
        else "max(epoch_us(block_time))" if c == "block_time"
        else f"sum({c})"
        for c in SCAN_COLUMNS
    )
    + " FROM read_parquet('{lake}/swaps/**/*.parquet', hive_partitioning = true)"
)


def duckdb_bars(lake, out):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(DUCKDB_BARS.format(lake=lake, out=out, level=ZSTD_LEVEL))
    con.close()


def duckdb_parquet_scans(lake, out):
    """How many times DuckDB's plan of the bars reads the Parquet files."""
    con = duckdb.connect()
    query = DUCKDB_BARS.format(lake=lake, out=out, level=ZSTD_LEVEL)
    plan = "\n".join(row[1] for row in con.execute("EXPLAIN " + query).fetchall())
    con.close()
    return plan.count("READ_PARQUET") + plan.count("PARQUET_SCAN")


def duckdb_scan(lake, out):
    con = duckdb.connect()
    con.execute(DUCKDB_SCAN.format(lake=lake)).fetchall()
    con.close()


def polars_bars(lake, out):
    lf = pl.scan_parquet(f"{lake}/swaps/**/*.parquet", hive_partitioning=True)
    common = [pl.col("block_time"), pl.col("block_slot"), pl.col("id")]
    bought = lf.filter(pl.col("swap_type").is_in(["quote_token", "token_token"])).select(
        pl.col("token_address_out").alias("token_address"),
        pl.col("token_price_out").alias("price"),
        pl.col("token_amount_out").alias("q"),
        pl.col("usd_amount_out").alias("usd"),
        pl.lit(True).alias("buy"),
        *common,
    )
    sold = lf.filter(pl.col("swap_type").is_in(["token_quote", "token_token"])).select(
        pl.col("token_address_in").alias("token_address"),
        pl.col("token_price_in").alias("price"),
        pl.col("token_amount_in").alias("q"),
        pl.col("usd_amount_in").alias("usd"),
        pl.lit(False).alias("buy"),
        *common,
    )
    bars = (
        pl.concat([bought, sold])
        .sort(["token_address", "block_time", "block_slot", "id"])
        .group_by(
            "token_address",
            pl.col("block_time").dt.truncate("1m").alias("timestamp"),
            maintain_order=True,
        )
        .agg(
            open=pl.col("price").first(),
            high=pl.col("price").max(),
            low=pl.col("price").min(),
            close=pl.col("price").last(),
            volume=pl.col("usd").sum(),
            base_volume=pl.col("q").sum(),
            buy_volume=pl.col("usd").filter(pl.col("buy")).sum(),
            sell_volume=pl.col("usd").filter(~pl.col("buy")).sum(),
            sum_pq=(pl.col("price") * pl.col("q")).sum(),
            sum_q=pl.col("q").sum(),
            count=pl.len(),
        )
        .with_columns(vwap=pl.col("sum_pq") / pl.col("sum_q"))
    )
    bars.collect().write_parquet(out, compression="zstd", compression_level=ZSTD_LEVEL)


def dexlake_bars(binary, lake, out):
    """Runs the CLI under /usr/bin/time -v; returns peak RSS in MiB."""
    return dexlake_peak_mib(binary, [
        "ohlcv", "--lake", lake, "--all-tokens", "--interval", "60", "--format", "parquet",
        "--out", out,
    ])


# The columns compared exactly: the keys, the event count, and the prices each bar picks.
EXACT = ("token_address", "timestamp", "count", "open", "high", "low", "close")
# The relative tolerance of the other (summed or divided) columns.
RTOL = 1e-9


def compare_bars(name, got, ref):
    """Asserts that `got` has `ref`'s bars, row by row, on every column of `ref` but
    `incomplete` (dexlake's own): EXACT equal, the others within RTOL. Returns the largest
    relative difference found."""
    columns = [c for c in ref.columns if c != "incomplete"]
    missing = [c for c in columns if c not in got.columns]
    assert not missing, f"{name} lacks the columns {missing}"
    assert got.height == ref.height, f"{name}: {got.height} bars vs {ref.height}"
    keys = ["token_address", "timestamp"]
    ref = ref.select(columns).sort(keys)
    got = got.select(pl.col(c).cast(ref.schema[c]) for c in columns).sort(keys)
    worst = 0.0
    for c in columns:
        a, b = got[c], ref[c]
        if c in EXACT:
            assert a.equals(b), f"{name}: {c} differs"
            continue
        both = pl.DataFrame({"a": a, "b": b})
        rel = both.select(
            ((pl.col("a") - pl.col("b")).abs()
             / pl.max_horizontal(pl.col("a").abs(), pl.col("b").abs())).alias("rel"),
            (pl.col("a").eq_missing(pl.col("b"))
             | (pl.col("a").is_nan() & pl.col("b").is_nan())).alias("same"),
        )
        far = rel.filter(~pl.col("same") & ~(pl.col("rel") <= RTOL))
        assert far.height == 0, f"{name}: {c} differs in {far.height} bars (relative {far['rel'][0]})"
        worst = max(worst, rel.filter(~pl.col("same"))["rel"].max() or 0.0)
    return worst


def parquet_codecs(path):
    """The compression codecs of every column chunk of a Parquet file."""
    meta = pq.ParquetFile(path).metadata
    return {
        meta.row_group(g).column(c).compression
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dexlake", required=True)
    ap.add_argument("--lake", default="target/compare-lake")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", default="large")
    a = ap.parse_args()
    lake = os.path.abspath(a.lake)
    if not os.path.exists(os.path.join(lake, "swaps")):
        os.makedirs(lake, exist_ok=True)
        t = time.perf_counter()
        subprocess.run(
            [a.dexlake, "bench-lake", lake, "--seed", str(a.seed), "--scale", a.scale], check=True
        )
        print(f"built the lake in {time.perf_counter() - t:.1f} s: {lake}")
    rows = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{lake}/swaps/**/*.parquet')"
    ).fetchall()[0][0]
    files = sum(1 for _, _, fs in os.walk(os.path.join(lake, "swaps")) for f in fs if f.endswith(".parquet"))
    print(f"lake: {rows} swaps in {files} files")

    out = tempfile.mkdtemp(prefix="dexlake-compare-")
    scans = duckdb_parquet_scans(lake, os.path.join(out, "explained.parquet"))
    assert scans == 1, f"DuckDB's plan of the bars reads the Parquet files {scans} times"
    engines = {
        "dexlake": lambda o: dexlake_bars(a.dexlake, lake, o),
        "DuckDB (one scan, time_bucket, arg_min/arg_max on (block_time, block_slot, id))": lambda o: duckdb_bars(lake, o),
        "polars (sort, group_by on truncated time)": lambda o: polars_bars(lake, o),
        "DuckDB bare scan of the same 12 columns (floor)": lambda o: duckdb_scan(lake, o),
    }
    times, rss = {}, []
    for run in range(a.runs):
        for name, f in engines.items():
            o = os.path.join(out, f"{name.split()[0]}-{run}.parquet")
            # Each engine writes about 300 MB: flushed before the next engine starts, so no
            # engine pays for writing back another's output.
            os.sync()
            dt, extra = timed(f, o)
            times.setdefault(name, []).append(dt)
            if name == "dexlake":
                rss.append(extra)
            print(f"run {run + 1}: {name}: {dt:.2f} s", flush=True)
            # Only the first run's results are compared below.
            if run > 0 and os.path.exists(o):
                os.remove(o)

    # The three results must agree before their times mean anything.
    bars = {
        p: pl.read_parquet(os.path.join(out, f"{p}-0.parquet")) for p in ("dexlake", "DuckDB", "polars")
    }
    for k in ("DuckDB", "polars"):
        worst = compare_bars(k, bars[k], bars["dexlake"])
        print(f"{k} vs dexlake: {bars[k].height} bars agree on every shared column "
              f"(largest relative difference of the sums: {worst:.3g})")
    # Every engine is asked for zstd level 1; dexlake stores a column raw from its second row
    # group on when zstd saved under 10 % in the first (the bars' prices and sums): the table
    # says so rather than hiding it.
    written = {p: parquet_codecs(os.path.join(out, f"{p}-0.parquet")) for p in bars}
    for k, codecs in written.items():
        assert codecs <= {"ZSTD", "UNCOMPRESSED"} and "ZSTD" in codecs, f"{k} wrote {codecs}"

    med = {k: statistics.median(v) for k, v in times.items()}
    d = med["dexlake"]
    print()
    print(f"| engine | median s ({a.runs} runs) | ratio to dexlake | bars written |")
    print("|---|---|---|---|")
    for k, v in med.items():
        if "floor" in k:
            wrote = "no output"
        elif written[k.split()[0]] == {"ZSTD"}:
            wrote = f"Parquet, zstd level {ZSTD_LEVEL}"
        else:
            wrote = (f"Parquet, zstd level {ZSTD_LEVEL}, columns zstd does not shrink by 10 % "
                     "stored raw after the first row group")
        print(f"| {k} | {v:.2f} | {v / d:.2f} | {wrote} |")
    peers = [v for k, v in med.items() if "floor" not in k and k != "dexlake"]
    floor = next(v for k, v in med.items() if "floor" in k)
    print()
    print(f"dexlake peak RSS: {max(rss):.0f} MiB (target < 1024)")
    print(f"speed-up over the fastest peer: {min(peers) / d:.2f}x (target >= 2)")
    print(f"dexlake / scan floor: {d / floor:.2f} (target <= 1.5)")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
