"""SQL over the 10M-swap lake: `dexlake sql` (polars' SQL over the committed files) against
DuckDB on the views `dexlake views` defines (the same committed files), for a few group-bys.

Run with `make compare-sql`, or
`python benches/compare/sql.py --dexlake target/release/dexlake [--lake DIR] [--runs 3]`.

The lake is the one `make compare` builds (`target/compare-lake`, the simulator's `--scale
large` market written by `dexlake bench-lake`); it must exist. dexlake is timed as a whole
process writing its answer as CSV to a file (with `/usr/bin/time -v` for its peak RSS, in a
separate run); DuckDB is timed around `COPY (query) TO file (FORMAT csv)` inside one process,
after `dexlake views` defined its views (the script is made once, untimed). Both answers are
read back and compared: same rows, counts exact, sums within 1e-9 relative.
"""

import argparse
import os
import statistics
import subprocess
import tempfile

import duckdb
import polars as pl

from harness import dexlake_peak_mib, timed

QUERIES = {
    "per day": (
        "select date, count(*) as n, sum(usd_amount_in) as usd_in, max(block_slot) as last_slot "
        "from swaps group by date order by date"
    ),
    "per token bought": (
        "select token_address_out as token, count(*) as n, sum(usd_amount_out) as usd, "
        "min(token_price_out) as low, max(token_price_out) as high "
        "from swaps where swap_type = 'quote_token' group by token_address_out order by token"
    ),
    "per wallet": (
        "select wallet_address as wallet, count(*) as n, sum(usd_amount_in) as usd "
        "from swaps group by wallet_address order by wallet"
    ),
}
KEYS = {"per day": ["date"], "per token bought": ["token"], "per wallet": ["wallet"]}


def dexlake_sql(binary, lake, query, out):
    subprocess.run(
        [binary, "--lake", lake, "sql", query, "--format", "csv", "--out", out],
        check=True,
        capture_output=True,
    )


def duckdb_sql(con, query, out):
    con.execute(f"COPY ({query}) TO '{out}' (FORMAT csv, HEADER)")


def same(name, a, b):
    a = a.sort(KEYS[name])
    b = b.sort(KEYS[name])
    assert a.columns == b.columns, (a.columns, b.columns)
    assert a.height == b.height, (name, a.height, b.height)
    for c in a.columns:
        x, y = a[c], b[c]
        if x.dtype.is_float() or y.dtype.is_float():
            x, y = x.cast(pl.Float64), y.cast(pl.Float64)
            rel = ((x - y).abs() / y.abs().clip(lower_bound=1e-300)).max()
            assert rel is None or rel <= 1e-9, (name, c, rel)
        else:
            assert (x.cast(pl.String) == y.cast(pl.String)).all(), (name, c)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dexlake", required=True)
    p.add_argument("--lake", default="target/compare-lake")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    lake = os.path.abspath(args.lake)
    if not os.path.isdir(lake):
        raise SystemExit(f"no lake at {lake}: run `make compare` first to build it")
    views = subprocess.run(
        [args.dexlake, "--lake", lake, "views", "--engine", "duckdb"],
        check=True, capture_output=True, text=True,
    ).stdout
    con = duckdb.connect()
    con.execute(views)
    rows = con.execute("select count(*) from swaps").fetchone()[0]
    print(f"lake: {lake}, {rows:,} swaps; {args.runs} runs, medians")
    print("| query | dexlake sql | peak RSS | DuckDB on the views | ratio (DuckDB / dexlake) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, query in QUERIES.items():
            dx, dk = os.path.join(tmp, "dexlake.csv"), os.path.join(tmp, "duckdb.csv")
            t_dx = [timed(dexlake_sql, args.dexlake, lake, query, dx)[0] for _ in range(args.runs)]
            t_dk = [timed(duckdb_sql, con, query, dk)[0] for _ in range(args.runs)]
            same(name, pl.read_csv(dx, try_parse_dates=True), pl.read_csv(dk, try_parse_dates=True))
            peak = dexlake_peak_mib(
                args.dexlake, ["--lake", lake, "sql", query, "--format", "csv", "--out", dx]
            )
            m_dx, m_dk = statistics.median(t_dx), statistics.median(t_dk)
            print(f"| {name} | {m_dx:.2f} s | {peak:.0f} MiB | {m_dk:.2f} s | {m_dk / m_dx:.2f} |")


if __name__ == "__main__":
    main()
