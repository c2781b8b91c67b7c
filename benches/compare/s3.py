"""Write, sync and scan throughput of a lake on an S3-compatible server next to a local folder.

    python benches/compare/s3.py --dexlake target/release/dexlake [--rows 1000000] [--runs 3]

The server is moto in server mode on loopback (python/s3_server.py's server), so the figures
measure dexlake's object-store path against a local, single-process Python server, not S3:
moto's request handling is the ceiling. For each root, one after the other in one run:

- write: `dexlake bench-lake --rows N` (the simulator's first N swaps of the medium market
  through the lake writer, commits and compaction included);
- sync: `dexlake sync swaps` of the most active tokens of `dexlake sim --scale small` over HTTP;
- scan: `dexlake ohlcv --all-tokens --interval 60` on the written lake (reads every committed
  file; median of --runs) and `dexlake verify` (reads every file in full).

Prints one table of seconds and rows per second.
"""

import argparse
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import timed

BUCKET = "bench"


def start_moto():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import s3_server

    server, endpoint, _ = s3_server.start([BUCKET], key="bench")
    return server, endpoint


def run(binary, env, *args, stdout=subprocess.DEVNULL):
    r = subprocess.run([binary, *args], env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"dexlake {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def start_sim(binary):
    proc = subprocess.Popen(
        [binary, "sim", "--seed", "3", "--scale", "small", "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=60):
        proc.kill()
        sys.exit("the simulator did not start")
    line = proc.stdout.readline()
    return proc, line.strip().removeprefix("listening on ")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dexlake", required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tokens", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    server, endpoint = start_moto()
    env = dict(
        os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
    )
    catalog = json.loads(run(args.dexlake, env, "sim", "--seed", "3", "--scale", "small",
                             "--catalog", stdout=subprocess.PIPE))
    tokens = sorted(catalog["altchain"]["tokens"], key=lambda t: -t["swap_count"])[: args.tokens]
    sim, url = start_sim(args.dexlake)
    results = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            roots = {"folder": str(Path(tmp) / "lake"), "S3 (moto)": f"s3://{BUCKET}/lake"}
            sync_roots = {"folder": str(Path(tmp) / "sync"), "S3 (moto)": f"s3://{BUCKET}/sync"}
            for name, root in roots.items():
                write_s, _ = timed(run, args.dexlake, env, "bench-lake", "--scale", "medium",
                                   "--rows", str(args.rows), "--chunk", "250000", root)
                synced = 0
                sync_s = 0.0
                for t in tokens:
                    seconds, _ = timed(run, args.dexlake, env, "--lake", sync_roots[name], "--base-url",
                                       url, "--api-key", "demo-key", "sync", "swaps", "--token",
                                       t["address"])
                    sync_s += seconds
                    synced += t["swap_count"]
                scans = []
                for _ in range(args.runs):
                    seconds, _ = timed(run, args.dexlake, env, "--lake", root, "ohlcv", "--all-tokens",
                                       "--interval", "60", "--format", "csv", "--out", "/dev/null")
                    scans.append(seconds)
                verify_s, _ = timed(run, args.dexlake, env, "--lake", root, "verify")
                results.append((name, write_s, sync_s, synced, statistics.median(scans), verify_s))
    finally:
        sim.kill()
        server.stop()

    n = args.rows
    print(f"\n{n:,} swaps written and scanned; {len(tokens)} tokens' swaps synced "
          f"({results[0][3]:,} swaps); ohlcv median of {args.runs}\n")
    print("| root | write (bench-lake) | sync (HTTP → lake) | ohlcv --all-tokens | verify |")
    print("|---|---|---|---|---|")
    for name, write_s, sync_s, synced, scan_s, verify_s in results:
        print(f"| {name} | {write_s:.2f} s ({n / write_s / 1e3:.0f} k rows/s) "
              f"| {sync_s:.2f} s ({synced / sync_s / 1e3:.1f} k rows/s) "
              f"| {scan_s:.2f} s ({n / scan_s / 1e6:.2f} M rows/s) "
              f"| {verify_s:.2f} s |")


if __name__ == "__main__":
    main()
