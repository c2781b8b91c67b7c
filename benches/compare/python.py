"""The Python package on the 10M-swap compare lake: what handing a frame to polars costs, and
`lake.bars(all_tokens=True)` from Python against the CLI writing the same bars.

Run with `make compare-python` (it builds the release binary, installs the package built in
release, and builds the lake once), or
`python benches/compare/python.py --dexlake target/release/dexlake [--lake DIR] [--runs 3]`
with the `dexlake` package installed in release.

Each measurement runs in a fresh process, so peak RSS (`ru_maxrss`) is its own:

- compute: `NativeLake.bars(...)` only (the frame is computed in Rust and dropped there);
- crossing: the same, then `polars.DataFrame(stream)`, timed apart;
- Python: `lake.bars(all_tokens=True, interval=60)` as a user calls it, end to end;
- CLI: `dexlake ohlcv --all-tokens --interval 60 --format parquet --out FILE` (it also writes
  the Parquet file, which Python does not).

The crossing must cost under 5 % of the compute and not double the peak memory.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from harness import dexlake_peak_mib

CHILD = r"""
import json, resource, sys, time
import polars as pl
import dexlake
mode, lake_root, interval = sys.argv[1], sys.argv[2], int(sys.argv[3])
lake = dexlake.Lake(lake_root)
out = {}
if mode == "python":
    t = time.perf_counter()
    df = lake.bars(all_tokens=True, interval=interval)
    out["total"] = time.perf_counter() - t
    out["rows"] = df.height
else:
    t = time.perf_counter()
    stream, notes = lake._native.bars(None, None, None, True, "swaps", None, None, interval,
                                      None, None, None, 0, "left", "left", "skip", None, False)
    out["compute"] = time.perf_counter() - t
    out["rows"] = len(stream)
    if mode == "crossing":
        t = time.perf_counter()
        df = pl.DataFrame(stream)
        out["crossing"] = time.perf_counter() - t
        assert df.height == out["rows"]
out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def child(mode, lake, interval):
    r = subprocess.run([sys.executable, "-c", CHILD, mode, lake, str(interval)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{mode} failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dexlake", required=True)
    ap.add_argument("--lake", default="target/compare-lake")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--interval", type=int, default=60)
    a = ap.parse_args()
    lake = os.path.abspath(a.lake)
    if not os.path.exists(os.path.join(lake, "swaps")):
        os.makedirs(lake, exist_ok=True)
        subprocess.run([a.dexlake, "bench-lake", lake, "--seed", "0", "--scale", "large"], check=True)
    out = os.path.join(lake, os.pardir, "python-compare-bars.parquet")
    results = {"compute": [], "crossing": [], "python": [], "cli": []}
    peaks = {"compute": [], "crossing": [], "python": [], "cli": []}
    rows = None
    for run in range(a.runs):
        c = child("compute", lake, a.interval)
        results["compute"].append(c["compute"]); peaks["compute"].append(c["peak_mib"])
        x = child("crossing", lake, a.interval)
        results["crossing"].append(x["crossing"]); peaks["crossing"].append(x["peak_mib"])
        p = child("python", lake, a.interval)
        results["python"].append(p["total"]); peaks["python"].append(p["peak_mib"])
        rows = p["rows"]
        t = time.perf_counter()
        rss = dexlake_peak_mib(a.dexlake, ["ohlcv", "--lake", lake, "--all-tokens", "--interval",
                                           str(a.interval), "--format", "parquet", "--out", out])
        results["cli"].append(time.perf_counter() - t); peaks["cli"].append(rss)
        print(f"run {run + 1}: compute {c['compute']:.2f} s, crossing {x['crossing'] * 1000:.1f} ms "
              f"(after a compute of {x['compute']:.2f} s), Python {p['total']:.2f} s, CLI {results['cli'][-1]:.2f} s",
              flush=True)
    import polars as pl
    assert pl.read_parquet(out).height == rows, "the CLI and Python give different bars"
    os.remove(out)
    med = {k: statistics.median(v) for k, v in results.items()}
    peak = {k: max(v) for k, v in peaks.items()}
    print(f"\nbars: {rows} rows (1 per token-minute with swaps)")
    print(f"| step | median ({a.runs} runs) | peak RSS |")
    print("|---|---|---|")
    print(f"| compute (Rust, frame dropped in Rust) | {med['compute']:.2f} s | {peak['compute']:.0f} MiB |")
    print(f"| crossing (`polars.DataFrame(stream)`) | {med['crossing'] * 1000:.1f} ms | {peak['crossing']:.0f} MiB (compute + crossing) |")
    print(f"| `lake.bars(all_tokens=True)` from Python | {med['python']:.2f} s | {peak['python']:.0f} MiB |")
    print(f"| CLI `ohlcv --all-tokens --format parquet` | {med['cli']:.2f} s | {peak['cli']:.0f} MiB |")
    print(f"\ncrossing / compute: {med['crossing'] / med['compute'] * 100:.2f} % (target < 5 %)")
    print(f"peak with crossing / peak without: {peak['crossing'] / peak['compute']:.2f} (target < 2)")
    print(f"Python / CLI: {med['python'] / med['cli']:.2f}")


if __name__ == "__main__":
    main()
