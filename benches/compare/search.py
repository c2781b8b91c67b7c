"""Local search-profiles on one million profiles: dexlake vs polars (Python) vs DuckDB, on the
same Parquet files and the same request.

Run with `make compare-search` (it builds the release binaries and the virtualenv first), or
`python benches/compare/search.py --dexlake target/release/dexlake --bench BIN [--lake DIR]
[--runs 5]`, BIN being the release build of `benches/search.rs`.

The data: the lake is built once (kept between runs) by the search bench itself, run with
`DEXLAKE_SEARCH_COMPARE=DIR`: the bench's one million synthetic profiles (metadata, market,
labels, one metrics window, about 10 % of values missing; seed 42), one snapshot written through
the lake's writer in ten commits of 100,000, so `DIR/token_profiles/**/*.parquet` is ten files of
one partition. Every engine reads those files. The request is the bench's:

    {"filter": {"market.liquidity": {"$gte": 10000}, "metrics.1h.volume": {"$gt": 1000},
                "labels": {"$eq": "hot"}},
     "sort": {"field": "metrics.1h.volume", "direction": "desc"}, "limit": 100}

with the service's (MongoDB) rules: a missing or null field matches neither `$gte` nor `$gt`,
`labels` matches when one element equals "hot", and ties sort by token_address in the sort's
direction (descending here), nulls last. Each engine gives the page's 100 rows and the count of
matches; the script checks that all give the same count and the same addresses in the same order.

- dexlake in memory: the bench binary times `analytics::screener::search_lazy` on the snapshot
  already collected (all document columns), in one process, and `analytics::screener::search` from
  the lake's files in the same process.
- dexlake CLI: `dexlake --lake DIR search --request FILE`, timed as a whole process (start,
  listing the snapshots, the search, the JSON printed).
- polars in memory: the files read once with `pl.read_parquet` (all columns, rechunked); timed: a lazy
  filter, sort and head(100) of the frame, and the count, collected together; and, as dexlake
  does it, the page's row numbers found from the key columns alone, then its rows gathered.
- polars and DuckDB from Parquet: the same query over the files, all columns of the page.

Times are medians of `--runs` runs after one warm-up, the Python peers timed around the query
inside one process (imports excluded).

With `--wide` (`make compare-search COMPARE_ARGS=--wide`), the script times instead the dexlake
CLI on wide filters over the same lake (built by the bench first if it is missing): a `$in` of
10,000 values (5,000 of the lake's addresses and 5,000 absent strings and numbers), an `$or` of
3,000 clauses and an `$and` of 3,000 clauses (addresses, `market.liquidity` and `labels`
conditions). Each count, and the first page's addresses, is checked against polars; the
request files are written next to the lake (`DIR-wide-*.json`).
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile

import duckdb
import polars as pl

from harness import timed

REQUEST = {
    "filter": {
        "market.liquidity": {"$gte": 10000},
        "metrics.1h.volume": {"$gt": 1000},
        "labels": {"$eq": "hot"},
    },
    "sort": {"field": "metrics.1h.volume", "direction": "desc"},
    "limit": 100,
}

DUCKDB_SEARCH = """
WITH m AS (
  SELECT * FROM read_parquet('{files}', hive_partitioning = true)
  WHERE market.liquidity >= 10000 AND metrics."1h".volume > 1000 AND list_contains(labels, 'hot')
)
SELECT token_address, (SELECT count(*) FROM m) AS count, *
FROM m
ORDER BY metrics."1h".volume DESC NULLS LAST, token_address DESC
LIMIT 100
"""


def files(lake):
    return f"{lake}/token_profiles/**/*.parquet"


VOLUME = pl.col("metrics").struct.field("1h").struct.field("volume")
MATCHES = (
    (pl.col("market").struct.field("liquidity") >= 10000)
    & (VOLUME > 1000)
    & pl.col("labels").list.contains("hot")
)


def polars_query(lf):
    volume = VOLUME
    matching = lf.filter(MATCHES)
    page = matching.sort(
        [volume, pl.col("token_address")], descending=[True, True], nulls_last=True
    ).head(100)
    count = matching.select(pl.len())
    page, count = pl.collect_all([page, count])
    return page["token_address"].to_list(), count.item()


def polars_keys_first(df):
    """The page's row numbers from the key columns alone, then its rows gathered: what dexlake
    does, written in polars."""
    keys = (
        df.lazy()
        .with_row_index("row")
        .select("row", "token_address", VOLUME.alias("volume"), MATCHES.alias("keep"))
        .filter(pl.col("keep"))
    )
    page = keys.sort(["volume", "token_address"], descending=[True, True], nulls_last=True).head(100)
    page, count = pl.collect_all([page, keys.select(pl.len())])
    rows = df[page["row"]]
    return rows["token_address"].to_list(), count.item()


def duckdb_query(con, lake):
    rows = con.execute(DUCKDB_SEARCH.format(files=files(lake))).fetchall()
    return [r[0] for r in rows], (rows[0][1] if rows else 0)


def median_of(runs, f, *args):
    f(*args)
    times, out = [], None
    for _ in range(runs):
        t, out = timed(f, *args)
        times.append(t)
    return statistics.median(times), out


def dexlake_cli(binary, lake, request_file):
    r = subprocess.run(
        [binary, "--lake", lake, "search", "--request", request_file],
        capture_output=True,
        text=True,
        check=True,
    )
    page = json.loads(r.stdout)
    return [d["token_address"] for d in page["data"]], page["count"]


def wide_requests(lake):
    """The wide requests over the lake, with the polars filter each one means."""
    addresses = (
        pl.scan_parquet(files(lake), hive_partitioning=True)
        .select("token_address")
        .head(5000)
        .collect()["token_address"]
        .to_list()
    )
    absent = [i if i % 2 else f"absent-{i}" for i in range(5000)]
    or_clauses, and_clauses = [], []
    for i in range(3000):
        if i % 3 == 0:
            or_clauses.append({"token_address": {"$eq": addresses[i]}})
            and_clauses.append({"token_address": {"$ne": addresses[i]}})
        elif i % 3 == 1:
            or_clauses.append({"market.liquidity": {"$gt": 1e15 + i}})
            and_clauses.append({"market.liquidity": {"$gte": -1 - i}})
        else:
            or_clauses.append({"labels": {"$eq": f"absent-{i}"}})
            and_clauses.append({"labels": {"$ne": f"absent-{i}"}})
    listed = pl.col("token_address").is_in(addresses[0:3000:3])
    liquidity = pl.col("market").struct.field("liquidity")
    return {
        "in_10000": (
            {"filter": {"token_address": {"$in": addresses + absent}}},
            pl.col("token_address").is_in(addresses),
        ),
        "or_3000": ({"filter": {"$or": or_clauses}}, listed),
        "and_3000": ({"filter": {"$and": and_clauses}}, ~listed & liquidity.is_not_null()),
    }


def wide(args, lake):
    """Times the dexlake CLI on the wide requests; checks each answer against polars."""
    if not os.path.isdir(os.path.join(lake, "token_profiles")):
        env = dict(os.environ, DEXLAKE_SEARCH_COMPARE=lake, DEXLAKE_SEARCH_RUNS="1")
        r = subprocess.run([args.bench], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"the search bench failed: {r.stderr}")
    scan = pl.scan_parquet(files(lake), hive_partitioning=True)
    print("| request | dexlake CLI, median | matching |")
    print("|---|---|---|")
    for name, (request, meaning) in wide_requests(lake).items():
        request_file = f"{lake}-wide-{name}.json"
        with open(request_file, "w") as f:
            json.dump(request, f)
        t, (page, count) = median_of(args.runs, dexlake_cli, args.dexlake, lake, request_file)
        matching = scan.filter(meaning).select("token_address").sort("token_address").collect()
        expected = matching["token_address"].to_list()
        if count != len(expected) or page != expected[:20]:
            raise SystemExit(f"{name}: dexlake counts {count}, polars {len(expected)}")
        print(f"| {name} | {t * 1000:,.1f} ms | {count:,} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dexlake", required=True, help="the release dexlake binary")
    ap.add_argument("--bench", required=True, help="the release build of benches/search.rs")
    ap.add_argument("--lake", default="target/compare-search-lake")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--wide", action="store_true", help="time the wide filters instead")
    args = ap.parse_args()
    lake = os.path.abspath(args.lake)
    if args.wide:
        wide(args, lake)
        return

    env = dict(os.environ, DEXLAKE_SEARCH_COMPARE=lake, DEXLAKE_SEARCH_RUNS=str(args.runs))
    r = subprocess.run([args.bench], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"the search bench failed: {r.stderr}")
    if r.stderr.strip():
        print(r.stderr.strip())
    bench = json.loads(r.stdout.strip().splitlines()[-1])
    expected = (bench["addresses"], bench["count"])
    n = bench["profiles"]

    results = {}
    results["dexlake, in memory (search_lazy)"] = (statistics.median(bench["in_memory_s"]), expected)
    results["dexlake, from Parquet (search, in process)"] = (
        statistics.median(bench["parquet_s"]),
        expected,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(REQUEST, f)
        request_file = f.name
    try:
        results["dexlake CLI, from Parquet (whole process)"] = median_of(
            args.runs, dexlake_cli, args.dexlake, lake, request_file
        )
    finally:
        os.unlink(request_file)

    # One chunk per column: gathering rows from a frame of ten chunks copies it whole first.
    frame = pl.read_parquet(files(lake), hive_partitioning=True).rechunk()
    results["polars, in memory"] = median_of(args.runs, polars_query, frame.lazy())
    results["polars, in memory (keys first, then the page's rows)"] = median_of(
        args.runs, polars_keys_first, frame
    )
    del frame
    results["polars, from Parquet"] = median_of(
        args.runs, polars_query, pl.scan_parquet(files(lake), hive_partitioning=True)
    )
    con = duckdb.connect()
    results["DuckDB, from Parquet"] = median_of(args.runs, duckdb_query, con, lake)

    for name, (_, answer) in results.items():
        if answer != expected:
            diverging = next(
                (i for i, (a, b) in enumerate(zip(answer[0], expected[0])) if a != b), None
            )
            raise SystemExit(
                f"{name} differs from dexlake: count {answer[1]} vs {expected[1]}, "
                f"{len(answer[0])} vs {len(expected[0])} rows, first difference at {diverging}"
            )
    print(
        f"{n:,} profiles, {expected[1]:,} matching; every engine returns the same "
        f"{len(expected[0])} addresses in the same order. Medians of {args.runs} runs:\n"
    )
    memory = results["dexlake, in memory (search_lazy)"][0]
    parquet = results["dexlake CLI, from Parquet (whole process)"][0]
    print("| engine | median | vs dexlake (same case) |")
    print("|---|---|---|")
    for name, (t, _) in results.items():
        base = memory if "in memory" in name else parquet
        print(f"| {name} | {t * 1000:,.1f} ms | {t / base:.2f}x |")


if __name__ == "__main__":
    main()
