"""How fast DuckDB and polars read a lake's swaps: six columns of every committed file.

Usage: python benches/compare/scan.py LAKE [--runs N]

Reads `LAKE/swaps/**/*.parquet` with hive partitioning, as a user of either engine would, and
sums the columns so every value is decoded. Prints the number of files and the median seconds
per engine. Used to compare a lake straight out of a sync with the same lake compacted.
"""

import argparse
import glob
import os
import statistics

import duckdb
import polars as pl

from harness import timed

COLUMNS = ["block_time", "pool_address", "token_amount_in", "token_amount_out", "usd_amount_in", "usd_amount_out"]


def with_polars(pattern):
    frame = pl.scan_parquet(pattern, hive_partitioning=True).select(
        pl.len(),
        pl.col("pool_address").n_unique(),
        *[pl.col(c).sum() for c in COLUMNS if c not in ("block_time", "pool_address")],
        pl.col("block_time").max(),
    )
    return frame.collect().row(0)[0]


def with_duckdb(pattern):
    con = duckdb.connect()
    sums = ", ".join(f"sum({c})" for c in COLUMNS if c not in ("block_time", "pool_address"))
    row = con.execute(
        f"select count(*), count(distinct pool_address), {sums}, max(block_time)::varchar "
        f"from read_parquet('{pattern}', hive_partitioning = true)"
    ).fetchone()
    return row[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lake")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pattern = os.path.join(args.lake, "swaps", "**", "*.parquet")
    files = len(glob.glob(pattern, recursive=True))
    print(f"{files} files")
    for name, f in [("polars", with_polars), ("DuckDB", with_duckdb)]:
        times = []
        rows = None
        for _ in range(args.runs):
            seconds, rows = timed(f, pattern)
            times.append(seconds)
        print(f"{name}: {statistics.median(times):.2f} s median of {args.runs} ({rows} rows)")


if __name__ == "__main__":
    main()
