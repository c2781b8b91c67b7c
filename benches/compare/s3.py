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

With `--ranged`, bars of one token read by range instead:

    python benches/compare/s3.py --dexlake target/release/dexlake --ranged [--scale large]
        [--rows 10000000] [--runs 3] [--token ADDRESS]

builds a folder lake of --rows swaps with `dexlake bench-lake`, copies its files as they are to
moto with boto3 (the same bytes on both roots), and times `dexlake ohlcv --token T --interval
60 --format parquet` on each root (median of --runs; the two outputs must be equal), for the
busiest token (in every row group) and a token of median activity, or the one --token names.
The bytes and GET requests of the S3 runs are dexlake's own count (the hidden
DEXLAKE_TRANSFER_STATS); beside them, what the reader needs, from the files' footers
(pyarrow): every footer, the kind and token columns of every row group, the number columns of
the row groups holding the token. moto's latency is the median of 1-byte ranged GETs through
boto3. `--scale small --rows 40000` runs in a minute with a debug build.
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


# The columns the bars' reader reads: in every row group, and in those holding the token.
SIDE_COLUMNS = ["swap_type", "token_address_in", "token_address_out"]
NUMBER_COLUMNS = ["id", "block_slot", "block_time", "token_amount_in", "token_amount_out",
                  "token_price_in", "token_price_out", "usd_amount_in", "usd_amount_out"]


def lake_files(folder):
    """Every file of the folder lake, as (path, path relative to the lake)."""
    out = []
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            out.append((path, path.relative_to(folder).as_posix()))
    return sorted(out)


def row_group_tokens(folder):
    """Per swaps file: its footer length, and per row group the set of tokens on either side."""
    import pyarrow.parquet as pq

    files = []
    for path, rel in lake_files(folder):
        if not rel.startswith("swaps/") or not rel.endswith(".parquet"):
            continue
        f = pq.ParquetFile(path)
        with open(path, "rb") as raw:
            raw.seek(-8, os.SEEK_END)
            footer = int.from_bytes(raw.read(4), "little") + 8
        groups = []
        for g in range(f.metadata.num_row_groups):
            t = f.read_row_group(g, columns=SIDE_COLUMNS[1:])
            tokens = set(t.column(0).to_pylist()) | set(t.column(1).to_pylist())
            groups.append(tokens)
        files.append((f.metadata, footer, groups, path.stat().st_size))
    return files


def needed_bytes(files, token):
    """Footers, the side columns of every row group and the number columns of the row groups
    holding `token`; the files' total; the row groups holding it and all."""
    needed = total = holding = count = 0
    for metadata, footer, groups, size in files:
        needed += footer
        total += size
        for g, tokens in enumerate(groups):
            rg = metadata.row_group(g)
            count += 1
            wanted = SIDE_COLUMNS + (NUMBER_COLUMNS if token in tokens else [])
            if token in tokens:
                holding += 1
            for c in range(rg.num_columns):
                col = rg.column(c)
                if col.path_in_schema in wanted:
                    needed += col.total_compressed_size
    return needed, total, holding, count


def moto_latency(endpoint, key):
    """Median seconds of a 1-byte ranged GET on moto through boto3."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
    times = []
    for _ in range(50):
        t = time.perf_counter()
        client.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-0")["Body"].read()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def ranged(args, env, endpoint):
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "lake"
        write_s, _ = timed(run, args.dexlake, env, "bench-lake", "--scale", args.scale, "--rows",
                           str(args.rows), "--chunk", "1000000", str(folder))
        files = lake_files(folder)
        for path, rel in files:
            client.upload_file(str(path), BUCKET, f"ranged/{rel}")
        s3_root = f"s3://{BUCKET}/ranged"
        groups = row_group_tokens(folder)
        spread = {}
        for _, _, gs, _ in groups:
            for tokens in gs:
                for t in tokens:
                    spread[t] = spread.get(t, 0) + 1
        by_spread = sorted(spread, key=lambda t: (-spread[t], t))
        tokens = [args.token] if args.token else [by_spread[0], by_spread[len(by_spread) // 2]]
        data_key = next(f"ranged/{rel}" for _, rel in files if rel.endswith(".parquet"))
        latency = moto_latency(endpoint, data_key)
        rows = []
        for token in tokens:
            needed, total, holding, count = needed_bytes(groups, token)
            outs, times, stats = {}, {}, None
            for name, root in [("folder", str(folder)), ("S3 (moto)", s3_root)]:
                out = Path(tmp) / f"bars-{name[:2]}.parquet"
                seconds = []
                for _ in range(args.runs):
                    t = time.perf_counter()
                    r = subprocess.run(
                        [args.dexlake, "--lake", root, "ohlcv", "--token", token, "--interval",
                         "60", "--format", "parquet", "--out", str(out)],
                        env=dict(env, DEXLAKE_TRANSFER_STATS="1"), stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)
                    seconds.append(time.perf_counter() - t)
                    if r.returncode != 0:
                        sys.exit(f"dexlake ohlcv on {root} failed: {r.stderr.strip()}")
                    if root == s3_root:
                        line = [l for l in r.stderr.splitlines() if l.startswith("transfer:")][-1]
                        words = line.split()
                        stats = (int(words[1]), int(words[4]))
                times[name] = statistics.median(seconds)
                outs[name] = out.read_bytes()
            if outs["folder"] != outs["S3 (moto)"]:
                sys.exit(f"the bars of {token} differ between the folder and S3")
            rows.append((token, holding, count, times, stats, needed, total))
    print(f"\n{args.rows:,} swaps (bench-lake --scale {args.scale}, written in {write_s:.1f} s), "
          f"{len(groups)} files; ohlcv --token T --interval 60 --format parquet, median of "
          f"{args.runs}; moto's ranged GET through boto3: {latency * 1e3:.2f} ms\n")
    print("| token (row groups holding it) | folder | S3 (moto) | S3 bound: 2× folder + GETs × "
          "latency | GETs | bytes fetched | needed: footers + its column chunks | fetched / "
          "needed | files |")
    print("|---|---|---|---|---|---|---|---|---|")
    for token, holding, count, times, (requests, fetched), needed, total in rows:
        bound = 2 * times["folder"] + requests * latency
        print(f"| {token[:10]}… ({holding}/{count}) | {times['folder']:.2f} s "
              f"| {times['S3 (moto)']:.2f} s | {bound:.2f} s | {requests:,} | {fetched / 1e6:.1f} MB "
              f"| {needed / 1e6:.1f} MB | {fetched / needed:.2f}× | {total / 1e6:.1f} MB |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dexlake", required=True)
    parser.add_argument("--rows", type=int, default=None,
                        help="swaps written (default 1,000,000; with --ranged 10,000,000)")
    parser.add_argument("--tokens", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ranged", action="store_true",
                        help="time bars of one token read by range instead (see above)")
    parser.add_argument("--scale", default="large",
                        help="the simulator's market written by bench-lake with --ranged")
    parser.add_argument("--token", help="with --ranged, the token whose bars are read")
    args = parser.parse_args()
    if args.ranged:
        args.rows = args.rows or 10_000_000
        server, endpoint = start_moto()
        env = dict(
            os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
        )
        try:
            ranged(args, env, endpoint)
        finally:
            server.stop()
        return
    args.rows = args.rows or 1_000_000

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
