"""dexlake's whole-lake commands on a 10M and a 100M lake, with DuckDB on the same files: wall
time and peak memory of each, and the ratio of the 100M run to the 10M run.

    python benches/compare/at_scale.py --dexlake target/release/dexlake \\
        --swaps target/compare-lake --trades target/compare-pnl-lake \\
        --swaps target/xl/swaps --trades target/xl/trades [--no-duckdb]

`--swaps` and `--trades` are given once per scale, smallest first, and pair up in order: lakes
written by the hidden `dexlake bench-lake` (`--scale large` for 10M rows, `--scale xlarge` for
100M, `--dataset trades` for the trades). Per pair, each command runs once, alone, under
`/usr/bin/time -v`:

- `ohlcv --all-tokens --interval 60 --format parquet` (swaps);
- `price-stats` of the 1,000 busiest tokens (swaps; a command line holds that many, not every
  token);
- `check --format json` (swaps);
- `verify --quick` (swaps);
- `pnl --all-wallets --format parquet` (trades);
- and, unless `--no-duckdb`, DuckDB's 1-minute bars and closed-form FIFO PnL of
  `ohlcv.py` and `pnl.py` on the same files, each in a Python process of its own so that its
  peak memory is its own.

The answers are not compared here: `ohlcv.py` and `pnl.py` do that on the 10M lakes, and the
tests compare every command read in parts with the command read whole.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))


def run(args):
    """(wall seconds, peak RSS MiB) of `args` under /usr/bin/time -v; exits on failure (exit
    status 1 of `check`, findings, is not one)."""
    r = subprocess.run(["/usr/bin/time", "-v", *args], capture_output=True, text=True)
    if r.returncode not in (0, 1) or (r.returncode == 1 and args[1] != "check"):
        sys.exit(f"{' '.join(args[:4])} failed ({r.returncode}): {r.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", r.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    parts = [float(p) for p in wall.group(1).split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    return seconds, int(rss.group(1)) / 1024


def busiest_tokens(lake, n):
    """The `n` tokens with the most token-side events of the swaps lake."""
    rows = duckdb.sql(f"""
        SELECT token, count(*) AS c FROM (
          SELECT token_address_out AS token FROM read_parquet('{lake}/swaps/**/*.parquet')
          WHERE swap_type IN ('quote_token', 'token_token')
          UNION ALL
          SELECT token_address_in FROM read_parquet('{lake}/swaps/**/*.parquet')
          WHERE swap_type IN ('token_quote', 'token_token'))
        GROUP BY token ORDER BY c DESC, token LIMIT {n}
    """).fetchall()
    return [r[0] for r in rows]


def duckdb_in_process(kind, lake, out):
    """(wall, peak RSS MiB) of the peer query `kind` (`bars` or `pnl`) in a Python process of
    its own."""
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import resource, time\n"
        "from %s import %s as f\n"
        "t = time.perf_counter(); f(%r, %r)\n"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    ) % (HERE, "ohlcv" if kind == "bars" else "pnl", "duckdb_bars" if kind == "bars" else "duckdb_pnl",
         lake, out)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall, rss = r.stdout.strip().splitlines()[-1].split()
    return float(wall), float(rss)


def rows_of(lake, dataset):
    return duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{lake}/{dataset}/**/*.parquet')"
    ).fetchall()[0][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dexlake", required=True)
    ap.add_argument("--swaps", action="append", required=True)
    ap.add_argument("--trades", action="append", required=True)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--no-duckdb", action="store_true")
    ap.add_argument("--skip", action="append", default=[],
                    help="leave out the commands whose name starts with this (repeatable)")
    a = ap.parse_args()
    assert len(a.swaps) == len(a.trades), "give --swaps and --trades once per scale"
    out = tempfile.mkdtemp(prefix="dexlake-at-scale-")
    results = []
    for swaps, trades in zip(a.swaps, a.trades):
        swaps, trades = os.path.abspath(swaps), os.path.abspath(trades)
        n_swaps, n_trades = rows_of(swaps, "swaps"), rows_of(trades, "trades")
        tokens = ",".join(busiest_tokens(swaps, a.tokens))
        print(f"{swaps}: {n_swaps} swaps; {trades}: {n_trades} trades", flush=True)
        bars, pnl = os.path.join(out, "bars.parquet"), os.path.join(out, "pnl.parquet")
        d = a.dexlake
        cases = [
            ("ohlcv --all-tokens --interval 60", [d, "ohlcv", "--lake", swaps, "--all-tokens",
                                                  "--interval", "60", "--format", "parquet",
                                                  "--out", bars]),
            (f"price-stats of the {a.tokens} busiest tokens",
             [d, "price-stats", "--lake", swaps, "--tokens", tokens, "--format", "csv"]),
            ("check --format json", [d, "check", "--lake", swaps, "--format", "json"]),
            ("verify --quick (swaps)", [d, "verify", "--lake", swaps, "--quick"]),
            ("pnl --all-wallets", [d, "pnl", "--lake", trades, "--all-wallets", "--format",
                                   "parquet", "--out", pnl]),
        ]
        row = {"swaps": n_swaps, "trades": n_trades}
        for name, args in cases:
            if any(name.startswith(k) for k in a.skip):
                continue
            os.sync()
            row[name] = run(args)
            print(f"  {name}: {row[name][0]:.1f} s, {row[name][1]:.0f} MiB", flush=True)
        if not a.no_duckdb:
            for name, kind, lake in (("DuckDB 1-minute bars", "bars", swaps),
                                     ("DuckDB closed-form FIFO PnL", "pnl", trades)):
                os.sync()
                row[name] = duckdb_in_process(kind, lake, os.path.join(out, f"{kind}-duckdb.parquet"))
                print(f"  {name}: {row[name][0]:.1f} s, {row[name][1]:.0f} MiB", flush=True)
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        results.append(row)
    print()
    names = [k for k in results[-1] if k not in ("swaps", "trades")]
    head = " | ".join(f"{r['swaps'] / 1e6:.0f}M swaps / {r['trades'] / 1e6:.0f}M trades" for r in results)
    print(f"| command | {head} | time ratio |")
    print("|---|" + "---|" * len(results) + "---|")
    for k in names:
        cells = " | ".join(f"{r[k][0]:.1f} s, {r[k][1]:,.0f} MiB" if k in r else "-" for r in results)
        ratio = (results[-1][k][0] / results[0][k][0]
                 if len(results) > 1 and k in results[0] else float("nan"))
        print(f"| {k} | {cells} | {ratio:.1f}x |")
    print()
    print(json.dumps(results))
    os.rmdir(out)


if __name__ == "__main__":
    main()
